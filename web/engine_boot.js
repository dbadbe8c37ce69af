// Appended to the emscripten module (tools/build_wasm.sh): the page's report.js calls
// window.ppsimEngineBoot() and gets a function from a request (JSON text) to the answer. The
// module is compiled synchronously (-sWASM_ASYNC_COMPILATION=0), so the page is complete when
// its load event fires (headless Chromium's --dump-dom reads it then); a promise is handled too.
window.ppsimEngineBoot = function () {
  var wrap = function (m) {
    var call = m.cwrap("ppsim_simulate_json", "string", ["string"]);
    return function (req) { return call(req); };
  };
  var m = PpsimEngine();
  return m && typeof m.then === "function" ? m.then(wrap) : wrap(m);
};
