// The book's interactive figures on the static website, with no kernel (attnbook.book.static_widgets).
// Each figure is a <div class="attn-static-widget"> holding real form controls, a readout in an
// aria-live region, the picture, and a JSON script with every precomputed state:
// {"i,j,...": [image source, alt text, readout]}, keyed by the index of each control's value.
// When a control changes, show that state: swap the image, its alt text and the readout (which the
// aria-live region announces), and say the slider's value in words (aria-valuetext and <output>).
(function () {
  "use strict";

  function index(control) {
    if (control.type === "checkbox") return control.checked ? 1 : 0;
    if (control.tagName === "SELECT") return control.selectedIndex;
    return Number(control.value);
  }

  function setUp(figure) {
    var states = JSON.parse(figure.querySelector("script.attn-static-states").textContent);
    var controls = Array.prototype.slice.call(figure.querySelectorAll("input, select"));
    var picture = figure.querySelector("img.attn-static-picture");
    var readout = figure.querySelector(".attn-static-readout");

    function show() {
      var key = controls.map(index).join(",");
      var state = states[key];
      if (!state) return;
      controls.forEach(function (control) {
        if (control.type !== "range") return;
        var text = JSON.parse(control.dataset.texts)[index(control)];
        control.setAttribute("aria-valuetext", text);
        var output = figure.querySelector('output[for="' + control.id + '"]');
        if (output) output.textContent = text;
      });
      picture.src = state[0];
      picture.alt = state[1];
      readout.textContent = state[2];
      figure.dispatchEvent(new CustomEvent("attn-static-state", { detail: key }));
    }

    controls.forEach(function (control) {
      control.addEventListener(control.type === "range" ? "input" : "change", show);
    });
    figure.dataset.ready = "true";
  }

  function setUpAll() {
    document.querySelectorAll(".attn-static-widget").forEach(setUp);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
