// The researcher's page: its content is fetched again every few seconds
// while the tab is visible, so new answers and favourites appear by
// themselves (the scroll position stays).
(function () {
  "use strict";
  const EVERY = 5000; // ms
  async function refresh() {
    if (document.visibilityState !== "visible") return;
    try {
      const response = await fetch(window.location.href, { cache: "no-store" });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      const main = fresh.querySelector("main");
      if (main) {
        document.querySelector("main").replaceWith(main);
        document.body.dataset.refreshed = String(Date.now());
      }
    } catch (err) {
      // the server is restarting or unreachable: the next round tries again
    }
  }
  window.setInterval(refresh, EVERY);
})();
