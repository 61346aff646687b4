// A stream that htmx's SSE extension opened anew (not the browser's own reconnect, which
// resumes with Last-Event-ID) starts from the page's cursor again: skip what is shown.
document.addEventListener("htmx:sseBeforeMessage", function (event) {
  var id = event.detail && event.detail.lastEventId;
  if (id && document.getElementById("item-" + id)) {
    event.preventDefault();
  }
});
