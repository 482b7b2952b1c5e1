// Settings → Agent: the system prompt (the engine's agent prompt unless the user writes another;
// the workspace's instructions, file list and the date are added after it) and the tool rules —
// each tool's rule is the user's, `auto`, `ask` or `deny`; a chat can only make one stricter.
import * as settingsStore from '../settings.js';
import { el } from '../view.js';

const q = (view, id) => view.querySelector(`[data-testid=${id}]`);

export default {
  id: 'agent',
  label: 'Agent',
  build() {
    return el('section', { class: 'settings-section' },
      el('label', {}, 'System prompt (the workspace\'s instructions, file list and the date are added after it)',
        el('textarea', { testid: 'system-prompt', id: 'system-prompt', rows: 8 })),
      el('fieldset', { testid: 'tool-policy', id: 'tool-policy' }, el('legend', { text: 'Tool rules' })));
  },
  fill(settings, view, ctx) {
    q(view, 'system-prompt').value = settings.system_prompt ?? '';
    drawRules(settings, view, ctx);
  },
  /** The workspace's tools changed (an MCP server became ready): its tools are listed too, and
   * the rules already chosen in the open dialog stay as chosen. */
  refresh(view, ctx) {
    drawRules(this.collect(settingsStore.loadSettings(), view), view, ctx);
  },
  collect(settings, view) {
    const tool_policy = { ...(settings.tool_policy ?? {}) };
    for (const select of view.querySelectorAll('[data-tool]')) tool_policy[select.dataset.tool] = select.value;
    return { ...settings, system_prompt: q(view, 'system-prompt').value.trim(), tool_policy };
  },
};

/** The system prompt's placeholder and a rule for each tool offered now (what the engine's module
 * knows: its default prompt, the tools' default rules), each set as `settings` choose. A rule
 * already drawn stays the same element, so a select a person has open stays open when an MCP
 * server's tools arrive. */
function drawRules(settings, view, ctx) {
  ctx.engine.defaults().then(({ prompt, rules }) => {
    q(view, 'system-prompt').placeholder = prompt;
    const policy = settingsStore.toolRules(settings, rules);
    const fieldset = q(view, 'tool-policy');
    const drawn = new Map([...fieldset.querySelectorAll('[data-tool]')].map((select) => [select.dataset.tool, select.closest('label')]));
    for (const [tool, label] of drawn) if (!(tool in policy)) label.remove();
    let previous = fieldset.querySelector('legend'); // build() made it
    previous.textContent = 'Tool rules (a chat can only make them stricter)';
    for (const tool of Object.keys(policy)) {
      const label = drawn.get(tool) ?? ruleLabel(tool);
      label.querySelector('select').value = policy[tool];
      if (previous.nextElementSibling !== label) previous.after(label);
      previous = label;
    }
  }, (error) => ctx.say(String(error?.message ?? error), true));
}

function ruleLabel(tool) {
  return el('label', { class: 'inline' },
    el('select', { testid: `policy-${tool}`, 'data-tool': tool }, ...['auto', 'ask', 'deny'].map((rule) => new Option(rule, rule))),
    ` ${tool}`);
}
