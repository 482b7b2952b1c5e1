// Test page: the engine's browser host on its own, for page-level tests (crash.mjs).
import init, { Palaver } from '/pkg/palaver.js';

await init();
window.palaver = await Palaver.open(undefined, 'crash-test');
window.ready = true;
