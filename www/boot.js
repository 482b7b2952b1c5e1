// The first script the page runs, loaded as it is (not part of pkg/app.js) and `async`, so it
// runs as soon as it arrives, while the page's bundle is still being read. When this start opens
// the engine at once (chats are stored here), the engine's wasm is fetched and compiled now,
// beside the bundle, instead of after it: on a cold start with a chat open that compile was
// ~90 ms of the way to a usable chat (issue 41). A first visit compiles nothing here: its engine
// waits for a first key or pointer press. The page takes the compile from
// `globalThis.palaverBoot.engine` (page/engine.js); if this script runs late, it is not waited
// for.

/** The marker the engine's browser host sets once it saved data (`palaver.has_data.{db}`, with
 * page/engine.js's DB_NAME). */
const HAS_DATA_KEY = 'palaver.has_data.palaver';

function storedHere() {
  try {
    return localStorage.getItem(HAS_DATA_KEY) !== null;
  } catch {
    return false; // storage refused: the engine is opened (or not) the usual way
  }
}

/** A `WebAssembly.Module`, or null when it failed (the engine then loads its wasm itself). */
function compile(url) {
  return WebAssembly.compileStreaming(fetch(url)).catch(() => null);
}

// The page may have begun loading the engine itself (this script came late): then it is left
// alone, or the wasm would be compiled twice.
globalThis.palaverBoot ??= {
  engine: storedHere() ? compile(new URL('../pkg/palaver_bg.wasm', import.meta.url)) : null,
};
