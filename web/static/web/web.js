// A stream that htmx's SSE extension opened anew (not the browser's own reconnect, which
// resumes with Last-Event-ID) starts from the page's cursor again: skip what is shown.
// An answer being written (event "partial") carries no id of its own: the browser's
// lastEventId is still the last item's, so it is never skipped.
document.addEventListener("htmx:sseBeforeMessage", function (event) {
  var id = event.detail && event.detail.lastEventId;
  if (event.detail && event.detail.type === "partial") {
    return;
  }
  if (id && document.getElementById("item-" + id)) {
    event.preventDefault();
  }
});

// A form's post refused as a whole (503 backlog-full, 429 throttled: the server answers
// htmx only the refusal's message) shows that message where the form's answer goes;
// htmx swaps no 4xx or 5xx answer by itself, so the post would fail without a word.
document.addEventListener("htmx:beforeSwap", function (event) {
  var detail = event.detail;
  if (detail && detail.xhr && detail.xhr.status >= 400 && detail.requestConfig && detail.requestConfig.verb === "post") {
    detail.shouldSwap = true; // still an error: the form keeps what was written
  }
});
