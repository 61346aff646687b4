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
