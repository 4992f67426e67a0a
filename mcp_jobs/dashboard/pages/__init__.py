"""One module per dashboard page; each `render(dash, request)` returns the page's HTML."""
