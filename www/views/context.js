// The context gauge: the engine's estimate of what the next request takes against the window
// (`runtime.context_usage`), and the provider's cache hits of the last answer.

export function render(node, chat) {
  if (!chat) {
    node.querySelector('meter').value = 0;
    node.querySelector('span').textContent = '';
    return;
  }
  const usage = chat.runtime.context_usage ?? {};
  let last = null;
  for (let i = chat.messages.length - 1; i >= 0 && !last; i -= 1) if (chat.messages[i].usage) last = chat.messages[i].usage;
  const estimated = usage.estimated_tokens ?? 0;
  const budget = usage.n_ctx ?? 0;
  const cacheRead = last?.cache_read_tokens ?? 0;
  const prompt = last?.prompt_tokens ?? 0;
  node.dataset.estimated = String(estimated);
  node.dataset.budget = String(budget);
  node.dataset.cacheRead = String(cacheRead);
  // The answer streaming now joins the history when it ends: the engine counts it
  // (`draft_tokens`), so the gauge moves while a long answer fills the window.
  const streaming = usage.draft_tokens ?? 0;
  const total = estimated + streaming;
  node.dataset.streaming = String(streaming);
  node.querySelector('meter').value = budget ? Math.min(1, total / budget) : 0;
  const cache = prompt ? ` · cache hits ${cacheRead.toLocaleString('en')} of ${prompt.toLocaleString('en')} prompt tokens (${Math.round((100 * cacheRead) / prompt)}%)` : '';
  node.querySelector('span').textContent = `≈ ${total.toLocaleString('en')} of ${budget.toLocaleString('en')} tokens${streaming ? ' (with the answer streaming)' : ''}${cache}`;
}

/** The gauge has no controls. */
export function bind() {}
