// Loaded between require.js and the ipywidgets HTML manager (embed-amd.js). Two adjustments make the
// vendored manager work on this offline MathJax-3 site:
//
// 1. Tell require.js where the manager lives. The manager computes the address of its icon fonts from
//    its own module id; without this mapping that id resolves relative to the page
//    (chapters/@jupyter-widgets/...) and every font request fails.
// 3. The manager's slider handles (role="slider") carry no accessible name; give each the text of its
//    widget's description label so that screen readers announce "k2, x" and not just a number.
// 2. The manager typesets widget labels through the MathJax 2 API (MathJax.Hub.Queue), which MathJax 3
//    does not have. Once MathJax 3 has started, give it a small Hub.Queue that forwards to
//    MathJax.typesetPromise, so labels with math are typeset instead of throwing.
(function () {
  var src = document.currentScript.src.split("?")[0];
  var folder = src.slice(0, src.lastIndexOf("/"));
  require.config({ paths: { "@jupyter-widgets/html-manager/dist": folder } });

  function installHubQueue() {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup || !mj.typesetPromise) return;
    mj.Hub = {
      Queue: function (job) {
        var element = Array.isArray(job) ? job[2] : undefined;
        mj.startup.promise = mj.startup.promise.then(function () {
          return mj.typesetPromise(element ? [element] : undefined);
        });
        return mj.startup.promise;
      },
    };
  }
  document.addEventListener("DOMContentLoaded", installHubQueue);

  function nameSliders(root) {
    root.querySelectorAll('[role="slider"]:not([aria-label])').forEach(function (handle) {
      var widget = handle.closest(".widget-slider, .jupyter-widgets");
      var label = widget && widget.querySelector(".widget-label");
      var text = label && label.textContent.trim();
      handle.setAttribute("aria-label", text || "slider");
    });
  }
  new MutationObserver(function () { nameSliders(document); })
    .observe(document.documentElement, { childList: true, subtree: true });
})();
