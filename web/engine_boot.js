// Appended to the emscripten module (tools/build_wasm.sh): the page's report.js calls
// window.ppsimEngineBoot() and gets a function from a request (JSON text) to the answer.
window.ppsimEngineBoot = function () {
  return PpsimEngine().then(function (m) {
    var call = m.cwrap("ppsim_simulate_json", "string", ["string"]);
    return function (req) { return call(req); };
  });
};
