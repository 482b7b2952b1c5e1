// Settings as a dialog (issue 38): sections in a tab list (Provider, Model in this browser, Agent,
// Workspace, Sync, Appearance), each its own module — `{id, label, build(ctx) → Node, fill(settings,
// view), collect(settings, view) → settings, check?(settings) → sentence | null, refresh?()}` —
// registered below: a new section is one module and one line. Close, Esc and the backdrop cancel;
// focus stays inside. Save checks every section (a setting that cannot work is refused with a
// sentence), stores the settings and the secrets, and applies them to the open engine at once.
import * as settingsStore from '../settings.js';
import * as secrets from '../page/secrets.js';
import provider from './provider.js';
import local from './local-model.js';
import agent from './agent.js';
import workspace from './workspace.js';
import sync from './sync.js';
import appearance from './appearance.js';
import { el } from '../view.js';
import { $ } from '../page/dom.js';

export const SECTIONS = [provider, local, agent, workspace, sync, appearance];

export function install(ctx) {
  const dialog = $('settings-dialog');
  const views = new Map();
  let proposal = null; // provider settings a link proposed: shown until Save or Cancel

  for (const section of SECTIONS) {
    const node = section.build(ctx);
    node.id = `settings-${section.id}`;
    node.dataset.section = section.id;
    node.setAttribute('role', 'tabpanel');
    node.setAttribute('aria-labelledby', `tab-${section.id}`);
    views.set(section.id, node);
    $('settings-sections').append(node);
    $('settings-nav').append(el('button', {
      type: 'button', id: `tab-${section.id}`, testid: `settings-tab-${section.id}`, text: section.label,
      role: 'tab', 'data-section': section.id, onclick: () => show(section.id),
    }));
  }
  $('settings-nav').setAttribute('role', 'tablist');

  function show(id) {
    for (const [name, node] of views) {
      node.hidden = name !== id;
      $(`tab-${name}`).setAttribute('aria-selected', String(name === id));
    }
    views.get(id)?.querySelector('input, select, textarea, button')?.focus();
  }

  /** Opens Settings on `section` (the provider's by default), filled from what is stored. */
  function open(section = 'provider') {
    const settings = settingsStore.loadSettings();
    for (const s of SECTIONS) s.fill(settings, views.get(s.id), ctx, s.id === 'provider' ? proposal : null);
    $('settings-said').textContent = '';
    if (!dialog.open) dialog.showModal();
    show(section);
  }

  function close() {
    proposal = null;
    dialog.close();
  }

  async function save(event) {
    event.preventDefault();
    let settings = settingsStore.loadSettings();
    for (const s of SECTIONS) settings = s.collect(settings, views.get(s.id), ctx);
    for (const s of SECTIONS) {
      const refusal = s.check?.(settings, views.get(s.id), ctx);
      if (refusal) {
        show(s.id);
        $('settings-said').textContent = refusal;
        $('settings-said').className = 'error';
        return;
      }
    }
    // Where the app is served from this machine, a remembered key is also locked by palaver
    // serve (SECURITY F7): ask it for its lock before anything is saved.
    const remembering = settings.remember_key || settings.sync?.remember;
    if (remembering && !(await secrets.unlock(ctx.workspace.proxy()))) {
      $('settings-said').textContent = 'Keys can be remembered here only while palaver serve answers: start it (or untick "Remember"), then Save again.';
      $('settings-said').className = 'error';
      return;
    }
    // Saved and closed at once (a person types the next message right away); the engine takes
    // the settings next, and remembered keys are stored behind it.
    settingsStore.saveSettings(settings);
    // A key to remember is stored before the dialog closes (a tab closed right after Save keeps
    // it); forgetting waits until after, so an ordinary Save closes at once and a person's next
    // message goes with the new settings.
    if (remembering && !(await persistSecrets(settings, true))) return;
    close();
    await ctx.engine.configure();
    ctx.limits.refresh(true); // what the provider says of the model, before its first request
    await ctx.sync.apply();
    ctx.empty.show();
    if (!remembering) await persistSecrets(settings, false);
  }

  /** Keeps or forgets each secret as `settings` say; false (and says why) when it fails. */
  async function persistSecrets(settings, inDialog) {
    try {
      for (const kind of settingsStore.PROVIDER_KINDS) await secrets.persist(kind, settings.remember_key);
      await secrets.persist('sync', settings.sync?.remember);
      return true;
    } catch (error) {
      if (inDialog) {
        $('settings-said').textContent = `The key could not be remembered on this device: ${error.message}`;
        $('settings-said').className = 'error';
      } else {
        ctx.say(`Saved, but the stored keys could not be removed: ${error.message}`, true);
      }
      return false;
    }
  }

  dialog.addEventListener('cancel', () => { proposal = null; });
  dialog.addEventListener('click', (event) => {
    if (event.target === dialog) close(); // the backdrop
  });
  $('settings-form').addEventListener('submit', save);
  $('close-settings').addEventListener('click', close);
  $('cancel-settings').addEventListener('click', close);
  $('settings').addEventListener('click', () => open());

  ctx.settings = {
    open,
    get isOpen() {
      return dialog.open;
    },
    /** A link proposed provider settings: they pre-fill the form when it opens, nothing more. */
    propose(proposed) {
      proposal = proposed;
    },
    refresh(id) {
      const section = SECTIONS.find((s) => s.id === id);
      if (dialog.open) section?.refresh?.(views.get(id), ctx);
    },
  };
}
