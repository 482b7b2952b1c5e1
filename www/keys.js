// Keyboard shortcuts and the theme switch (issue 19). Shortcuts act through the page's own
// controls (the Stop button, a message's Edit, the chat list), so a key does exactly what the click
// does; `?` opens the list of them (the `#shortcuts` dialog).

const THEME_KEY = 'palaver.theme';
const THEMES = ['auto', 'light', 'dark'];

/** Applies the stored theme (`auto` follows the system) and labels the switch. */
export function applyTheme(button) {
  const theme = THEMES.includes(localStorage.getItem(THEME_KEY)) ? localStorage.getItem(THEME_KEY) : 'auto';
  if (theme === 'auto') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  if (button) button.textContent = `Theme: ${theme}`;
  return theme;
}

export function bindTheme(button) {
  applyTheme(button);
  button.addEventListener('click', () => {
    const next = THEMES[(THEMES.indexOf(applyTheme()) + 1) % THEMES.length];
    localStorage.setItem(THEME_KEY, next);
    applyTheme(button);
  });
}

const typing = (target) => target instanceof HTMLElement && (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName));

/**
 * `actions`: {closeDrawer(), stop(), focusComposer(), editLast(), newChat(), moveChat(±1), openSettings()} —
 * each returns true when it did something (the key is then consumed).
 */
export function bindShortcuts(actions, dialog) {
  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    const composer = event.target?.id === 'composer';
    // Esc first closes what the composer opened (the @ and / menus).
    if (event.key === 'Escape' && document.querySelector('#mention-list:not([hidden]), #prompt-list:not([hidden]), #resource-list:not([hidden])')) return;
    let done = false;
    if (event.key === 'Escape' && event.shiftKey) done = actions.focusComposer();
    else if (event.key === 'Escape' && !dialog.open) done = actions.closeDrawer?.() || actions.stop();
    else if (event.key === 'ArrowUp' && composer && !event.altKey && event.target.value === '') done = actions.editLast();
    else if (event.altKey && !event.ctrlKey && !event.metaKey && (event.code === 'KeyN')) done = actions.newChat();
    else if (event.altKey && event.key === 'ArrowUp') done = actions.moveChat(-1);
    else if (event.altKey && event.key === 'ArrowDown') done = actions.moveChat(1);
    else if (event.altKey && event.code === 'Comma') done = actions.openSettings();
    else if (event.key === '?' && !typing(event.target)) {
      dialog.showModal();
      done = true;
    }
    if (done) event.preventDefault();
  });
}
