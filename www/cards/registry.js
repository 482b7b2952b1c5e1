// The cards under the transcript (the plan, a tool approval, the assistant's questions,
// Regenerate, and those later issues add). A card is one module exporting
//   { name, slot?, select(chat) → data | null, render(data, ctx) → Node, actions: { name(chat, target, send) } }
// where `select` reads what the engine reports (the mirror's runtime and messages; never
// re-derived engine state), `render` builds the card from that data, and each action answers a
// click on a `[data-action]` button inside it by sending the engine a command. A new card is a
// new module and one line below; nothing else in the page changes.
import plan from './plan.js';
import approval from './approval.js';
import askUser from './ask-user.js';
import regenerate from './regenerate.js';
import subagents from './subagents.js';
import proposedPrompt from './proposed-prompt.js';

export const CARDS = [proposedPrompt, plan, subagents, approval, askUser, regenerate];

/** Renders every card whose `select` gives data into its slot (`cards` unless it names one). */
export function render(slots, chat, ctx) {
  const bySlot = new Map(Object.keys(slots).map((slot) => [slot, []]));
  // A card whose data did not change keeps its node: what the user typed or selected in it
  // (an answer being written, focus) survives the engine's other events.
  const shown = new Map(Object.values(slots).flatMap((slot) => [...slot.children]).map((n) => [n.dataset.card, n]));
  for (const card of CARDS) {
    const data = card.select(chat);
    if (data === null || data === undefined) continue;
    const key = JSON.stringify(data);
    const kept = shown.get(card.name);
    const node = kept?.cardKey === key ? kept : card.render(data, ctx);
    node.dataset.card = card.name;
    node.cardKey = key;
    bySlot.get(card.slot ?? 'cards')?.push(node);
  }
  for (const [slot, nodes] of bySlot) {
    const same = nodes.length === slots[slot].children.length && nodes.every((n, i) => slots[slot].children[i] === n);
    if (!same) slots[slot].replaceChildren(...nodes);
    slots[slot].hidden = nodes.length === 0;
  }
}

/** One click handler per slot: the action named by the button, of the card it sits in. */
export function bind(slots, { chat, send, open, review, load, say }) {
  for (const root of Object.values(slots)) {
    root.addEventListener('click', (event) => {
      const target = event.target.closest('[data-action]');
      const card = CARDS.find((c) => c.name === target?.closest('[data-card]')?.dataset.card);
      const action = card?.actions?.[target.dataset.action];
      const current = chat();
      if (action && current) action(current, target, send, { open, review, load, say });
    });
  }
}
