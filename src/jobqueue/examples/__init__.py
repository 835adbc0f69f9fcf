"""The course's running example: a shop, with its services, tables and worker handlers.

Payloads and fake services are in :mod:`.shop`, the tables in :mod:`.shop_db`, and the
handlers ``jobqueue worker`` loads in :mod:`.shop_worker`. The library never imports this
package (``tests/test_layout.py``): a reader of ``jobqueue`` sees the queue, the worker and
the backends, and the shop only where a lesson or a test uses it.
"""
