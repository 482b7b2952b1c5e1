// The page for now: loads the wasm engine from pkg/, shows its version, and runs one turn
// through it (a replayed stream, no network) to show the core works in this browser.
import init, { Engine } from '../pkg/palaver.js';

const version = document.getElementById('engine-version');
const check = document.getElementById('engine-check');

async function main() {
  await init();
  version.textContent = Engine.version();
  const engine = new Engine({ providers: [{ kind: 'openai-chat', base_url: 'http://127.0.0.1:1/v1', model: 'demo' }] });
  engine.handle(Date.now(), { input: 'open_chat', chat_id: 'demo' });
  const step = engine.handle(Date.now(), { input: 'command', chat_id: 'demo', command: { type: 'user_message', content: 'hello', client_request_id: 'demo-1' } });
  const request = step.effects.find((effect) => effect.effect === 'start_request');
  const sse = 'data: {"choices":[{"index":0,"delta":{"content":"Hello from the engine."},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n';
  engine.streamBytes(Date.now(), request.request_id, new TextEncoder().encode(sse));
  engine.handle(Date.now(), { input: 'stream_end', request_id: request.request_id });
  const snapshot = engine.snapshot('demo');
  check.textContent = `Self-check: ${snapshot.messages.at(-1).content} (state: ${snapshot.runtime.state})`;
}

main().catch((error) => {
  version.textContent = 'failed to load';
  check.textContent = String(error);
  check.className = 'error';
});
