// The jobqueue dashboard's page: polls api/snapshot every 2 s and draws it. Every value is
// put in the page as text (textContent), never as HTML. Actions are POSTs that carry the
// page's CSRF token in a header; a read-only dashboard shows no buttons (and refuses POSTs).
"use strict";

const TOKEN = document.querySelector('meta[name="jobqueue-csrf-token"]').content;
const READ_ONLY = document.querySelector('meta[name="jobqueue-read-only"]').content === "true";
const REFRESH_MS = 2000;
const LABELS = { waiting: "waiting", scheduled: "scheduled", leased: "leased", dead: "dead", cancelled: "cancelled" };
const OUTCOMES = ["done", "failed"];

let chart = null;

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== null) node.textContent = text;
  return node;
}

// An estimate is shown to 3 significant digits, which is all a sample of the table gives.
function number(value, approximate) {
  if (!approximate) return Math.round(value).toLocaleString("en");
  return "≈" + Number(Math.round(value).toPrecision(3)).toLocaleString("en");
}

function seconds(s) {
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

function card(kind, label, value) {
  const node = el("div", { class: `card ${kind}`, "data-card": kind });
  node.append(el("div", { class: "label" }, label), el("div", { class: "value" }, value));
  return node;
}

function drawTotals(snap) {
  const estimated = new Set(snap.estimated);
  const cards = snap.states.map((state) => card(state, LABELS[state], number(snap.totals[state], estimated.has(state))));
  cards.push(card("done", "done, 10 min", number(snap.done, false)));
  cards.push(card("failure", "failure rate", `${(snap.failure_rate * 100).toFixed(1)} %`));
  cards.push(card("oldest", "oldest waiting", seconds(snap.oldest_waiting_age_s)));
  // null when counting it would read every job (PostgreSQL with estimated counts)
  const enqueued = snap.oldest_enqueued_age_s;
  cards.push(card("enqueued", "oldest since enqueue", enqueued === null ? "n/a" : seconds(enqueued)));
  document.getElementById("totals").replaceChildren(...cards);
}

function drawCensus(snap) {
  drawCounts(snap, "by-type", snap.by_type, "job type", "job_type", "data-type");
  drawCounts(snap, "by-queue", snap.by_queue, "queue", "queue", "data-queue");
}

// One table of counts by state, then the attempts done and failed over the chart's 10 minutes
// (as the "done, 10 min" card): a row per job type (or per named queue), keyed by `key`.
function drawCounts(snap, id, entries, label, key, attribute) {
  const table = document.getElementById(id);
  const estimated = new Set(snap.estimated);
  const head = el("tr");
  head.append(el("th", {}, label), ...snap.states.map((s) => el("th", { class: "num" }, LABELS[s])));
  head.append(...OUTCOMES.map((outcome) => el("th", { class: "num" }, `${outcome}, 10 min`)));
  table.tHead.replaceChildren(head);
  const rows = entries.map((counts) => {
    const row = el("tr", { [attribute]: counts[key] });
    row.append(el("td", {}, counts[key]));
    for (const state of snap.states) {
      row.append(el("td", { class: "num", "data-state": state }, number(counts[state], estimated.has(state))));
    }
    for (const outcome of OUTCOMES) {
      row.append(el("td", { class: "num", "data-outcome": outcome }, number(counts[outcome], false)));
    }
    return row;
  });
  if (!rows.length) rows.push(emptyRow(snap.states.length + OUTCOMES.length + 1, "no jobs"));
  table.tBodies[0].replaceChildren(...rows);
  document.getElementById("estimated-note").hidden = estimated.size === 0;
}

function emptyRow(span, text) {
  const row = el("tr");
  row.append(el("td", { colspan: span, class: "empty" }, text));
  return row;
}

function cancelButton(id) {
  const button = el("button", { class: "cancel", type: "button" }, "Cancel");
  button.addEventListener("click", () => act("jobs/cancel", id, [button]));
  return button;
}

function drawRunning(snap) {
  document.querySelector("#running .actions-head").hidden = READ_ONLY;
  document.getElementById("cancel-form").hidden = READ_ONLY;
  const rows = snap.running.map((job) => {
    const row = el("tr", { "data-id": job.id });
    row.append(
      el("td", { class: "id" }, job.id),
      el("td", {}, job.type),
      el("td", { class: "num" }, `${job.attempt} / ${job.max_attempts}`),
      el("td", { class: "when" }, `in ${seconds(Math.max(0, job.leased_until - snap.at))}`),
    );
    if (!READ_ONLY) {
      const cell = el("td", { class: "actions" });
      cell.append(cancelButton(job.id));
      row.append(cell);
    }
    return row;
  });
  if (!rows.length) rows.push(emptyRow(READ_ONLY ? 4 : 5, "no job is running"));
  document.querySelector("#running tbody").replaceChildren(...rows);
}

function drawDead(snap) {
  document.querySelector("#dead .actions-head").hidden = READ_ONLY;
  const rows = snap.dead_letters.map((letter) => {
    const row = el("tr", { "data-id": letter.id });
    row.append(
      el("td", { class: "id" }, letter.id),
      el("td", {}, letter.type),
      el("td", { class: "num" }, `${letter.attempts} / ${letter.max_attempts}`),
      el("td", { class: "when" }, `${seconds(Math.max(0, snap.at - letter.died_at))} ago`),
      el("td", { class: "error" }, letter.last_error || ""),
    );
    if (!READ_ONLY) {
      const cell = el("td", { class: "actions" });
      const replay = el("button", { class: "replay", type: "button" }, "Replay");
      const discard = el("button", { class: "discard", type: "button" }, "Discard");
      replay.addEventListener("click", () => act("dead-letters/replay", letter.id, [replay, discard]));
      discard.addEventListener("click", () => act("dead-letters/discard", letter.id, [replay, discard]));
      cell.append(replay, discard);
      row.append(cell);
    }
    return row;
  });
  if (!rows.length) rows.push(emptyRow(READ_ONLY ? 5 : 6, "no dead letters"));
  document.querySelector("#dead tbody").replaceChildren(...rows);
}

const TIME_STEPS_S = [60, 120, 300, 600, 900, 1800, 3600];

function clockTime(epochSeconds) {
  return new Date(epochSeconds * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });
}

function drawChart(snap) {
  const xs = snap.rates.map((r) => r.start);
  const data = [xs, snap.rates.map((r) => r.per_s), snap.rates.map((r) => r.failure_rate * 100)];
  const box = document.getElementById("chart");
  if (chart === null) {
    chart = new uPlot(
      {
        width: box.clientWidth,
        height: 260,
        scales: { rate: { range: [0, 100] } },
        series: [
          {},
          { label: "done per second", stroke: "#2e8b57", fill: "rgba(46,139,87,0.12)", width: 2, scale: "jobs", points: { show: false } },
          { label: "failure rate %", stroke: "#c0392b", width: 2, scale: "rate", points: { show: false } },
        ],
        axes: [
          // Whole minutes as 24-hour clock times, one line each: uPlot's default put the
          // date and time under the first tick, wider than the gap to the next label.
          { space: 60, incrs: TIME_STEPS_S, values: (u, ticks) => ticks.map(clockTime) },
          { scale: "jobs", label: "jobs / s", size: 60 },
          { scale: "rate", side: 1, label: "failed %", grid: { show: false }, size: 50 },
        ],
      },
      data,
      box,
    );
    window.addEventListener("resize", () => chart.setSize({ width: box.clientWidth, height: 260 }));
  } else {
    chart.setData(data);
  }
}

// PostgreSQL only (snap.cleanup is null elsewhere): the oldest transaction holding back
// vacuum of the queue's table and its dead rows, in red past the warning threshold.
function drawCleanup(snap) {
  const line = document.getElementById("cleanup");
  const report = snap.cleanup;
  line.hidden = report === null;
  if (report === null) return;
  const oldest = report.oldest;
  const holder = oldest === null
    ? "nothing holds it back"
    : `held back by pid ${oldest.pid} (${oldest.application_name || "no application_name"}, ${oldest.state}), open ${seconds(oldest.age_s)}`;
  line.className = report.warning ? "cleanup warning" : "cleanup";
  line.textContent = `Cleanup: ${number(report.dead_rows, false)} dead rows in the queue's table, ${holder}.`
    + (report.warning ? ` ${report.warning}` : "");
}

// action: "dead-letters/replay", "dead-letters/discard" or "jobs/cancel".
async function act(action, id, buttons) {
  buttons.forEach((b) => (b.disabled = true));
  const message = document.getElementById("action-message");
  try {
    const response = await fetch(`api/${action}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": TOKEN },
      body: JSON.stringify({ id }),
    });
    const body = await response.json().catch(() => ({ message: response.statusText }));
    message.textContent = body.message;
    await refresh();
  } catch (error) {
    message.textContent = `${action} failed: ${error}`;
    buttons.forEach((b) => (b.disabled = false));
  }
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("api/snapshot", { cache: "no-store" });
    const snap = await response.json();
    if (!response.ok) throw new Error(snap.message || response.statusText);
    drawTotals(snap);
    drawCleanup(snap);
    drawChart(snap);
    drawCensus(snap);
    drawRunning(snap);
    drawDead(snap);
    status.className = "status";
    status.textContent = `updated ${new Date().toLocaleTimeString("en-GB")}${READ_ONLY ? " · read-only" : ""}`;
  } catch (error) {
    status.className = "status error";
    status.textContent = `cannot refresh: ${error.message}`;
  }
}

// A waiting job is not listed: the form cancels one by its id.
document.getElementById("cancel-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("cancel-id");
  const button = event.target.querySelector("button");
  if (input.value) act("jobs/cancel", input.value, [button]).then(() => (button.disabled = false));
});

refresh();
setInterval(refresh, REFRESH_MS);
