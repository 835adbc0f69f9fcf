"""A text box for code: Tab indents instead of moving on, as it does in a code editor.

A plain ``<textarea>`` (ipywidgets' Textarea) gives Tab to the browser, which moves the
focus to the next control: code typed after a Tab lands in the next question. This widget
is a textarea whose Tab inserts four spaces (or indents the selected lines) and whose
Shift+Tab removes up to four from the start of each selected line. Escape then Tab leaves
the box, so a keyboard user is never trapped in it.

Built on anywidget (ES module and CSS shipped as strings, no build step). Stable hooks:
the widget's element has class ``code-box`` and holds one ``textarea``.

Introduced in lesson 17 (the quiz's "write code" answers).
"""

from __future__ import annotations

import anywidget
import traitlets

INDENT = "    "
"""What one Tab inserts: four spaces, as in the course's code."""

_ESM = r"""
const INDENT = "    ";
function render({ model, el }) {
  el.classList.add("code-box");
  const area = document.createElement("textarea");
  area.spellcheck = false;
  area.setAttribute("autocapitalize", "off");
  area.setAttribute("autocomplete", "off");
  area.title = "Tab indents, Shift+Tab outdents; Escape then Tab moves on";
  let escaped = false; // Escape pressed just before: this Tab leaves the box as usual

  const show = () => {
    if (area.value !== model.get("value")) area.value = model.get("value");
    area.rows = model.get("rows");
    area.placeholder = model.get("placeholder");
    area.disabled = model.get("disabled");
  };
  const save = () => {
    model.set("value", area.value);
    model.save_changes();
  };
  // Replace the characters start..end, keeping the browser's undo history where it can.
  const replace = (start, end, text) => {
    area.setSelectionRange(start, end);
    if (!document.execCommand("insertText", false, text)) {
      area.setRangeText(text, start, end, "end");
      area.dispatchEvent(new Event("input"));
    }
  };
  // Keys typed here are the box's own: JupyterLab must not see them as notebook shortcuts
  // (Enter would enter the cell's editor and take the focus), as ipywidgets' Textarea does.
  for (const kind of ["keypress", "keyup"]) area.addEventListener(kind, (event) => event.stopPropagation());
  area.addEventListener("keydown", (event) => {
    event.stopPropagation();
    if (event.key === "Escape") { escaped = true; return; }
    const leave = escaped;
    escaped = false;
    if (event.key !== "Tab" || leave || event.ctrlKey || event.altKey || event.metaKey) return;
    event.preventDefault();
    const { selectionStart: start, selectionEnd: end, value } = area;
    const lineStart = value.lastIndexOf("\n", start - 1) + 1;
    if (!event.shiftKey && !value.slice(start, end).includes("\n")) {
      replace(start, end, INDENT);
      return;
    }
    // Several lines selected, or Shift+Tab: indent or outdent every line the selection touches.
    const block = value.slice(lineStart, end);
    const lines = block.split("\n");
    const changed = lines.map((line) => {
      if (!event.shiftKey) return line ? INDENT + line : line;
      return line.slice(Math.min(INDENT.length, line.match(/^ */)[0].length));
    }).join("\n");
    if (changed === block) return;
    replace(lineStart, end, changed);
    const firstShift = changed.split("\n")[0].length - lines[0].length;
    const newStart = Math.max(lineStart, start + firstShift);
    area.setSelectionRange(newStart, start === end ? newStart : lineStart + changed.length);
  });
  area.addEventListener("input", save);
  model.on("change", show);
  show();
  el.appendChild(area);
  return () => model.off("change", show);
}
export default { render };
"""

_CSS = """
.code-box {
  align-self: stretch;
  box-sizing: border-box;
  margin: var(--jp-widgets-margin, 2px);
}
.code-box textarea {
  display: block;
  width: 100%;
  box-sizing: border-box;
  resize: vertical;
  padding: 4px 8px;
  font-family: var(--jp-code-font-family, monospace);
  font-size: var(--jp-code-font-size, 13px);
  line-height: var(--jp-code-line-height, 1.3);
  tab-size: 4;
  white-space: pre;
  overflow-x: auto;
  color: var(--jp-widgets-input-color, inherit);
  background: var(--jp-widgets-input-background-color, white);
  border: var(--jp-widgets-input-border-width, 1px) solid var(--jp-widgets-input-border-color, #9e9e9e);
}
.code-box textarea:focus {
  border-color: var(--jp-widgets-input-focus-border-color, #64b5f6);
  outline: none;
}
.code-box textarea:disabled {
  opacity: var(--jp-widgets-disabled-opacity, 0.6);
}
"""


class CodeBox(anywidget.AnyWidget):
    """A multi-line text box for source code, whose Tab key indents.

    Args (traits, settable as keyword arguments):
        value: the text in the box, kept in step with what is typed.
        rows: its height in lines. placeholder: the grey text shown while it is empty.
        disabled: when true, the box cannot be edited.
    """

    _esm = _ESM
    _css = _CSS
    value = traitlets.Unicode("").tag(sync=True)
    rows = traitlets.Int(6).tag(sync=True)
    placeholder = traitlets.Unicode("").tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)

    def __repr__(self) -> str:
        return f"CodeBox({len(self.value.splitlines())} lines)"
