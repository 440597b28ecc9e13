// The live page: the workshop renders the page's content and sends it
// whole over server-sent events a few times a second; this only swaps it
// in, and sends the "run this stage" click. A page opened mid-run gets the
// current state as its first event.
"use strict";
(function () {
  const main = document.getElementById("live");
  // The run's token: POST /run is refused without it, so no other page
  // open in the browser can start a stage. A page shown to a room
  // (--live-room) carries none: its button asks for the admin token.
  let token = document.querySelector('meta[name="run-token"]').content;
  const events = new EventSource("/events");
  events.onmessage = (e) => {
    main.innerHTML = JSON.parse(e.data);
    document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
  };
  document.addEventListener("click", (e) => {
    const button = e.target.closest("button[data-run]");
    if (!button) return;
    if (!token) token = window.prompt("The workshop's admin token (--admin-token, or admin_token in workshop.json):") || "";
    if (!token) return;
    button.disabled = true;
    fetch("/run", { method: "POST", headers: { "X-Run-Token": token } }).then((res) => {
      if (res.status === 403 && !document.querySelector('meta[name="run-token"]').content) token = "";
      if (!res.ok) button.disabled = false;
    });
  });
})();
