// The one way the page tests act (issue 34, GUIDE §18): as a person does. A control is used as
// soon as it is visible and enabled (Playwright's locators wait for exactly that, and nothing
// else); nothing waits on `data-ready`, an engine flag or an internal event before acting; what
// is checked is what a person sees. Reading storage for a security assertion is allowed — it is
// never a reason to wait before acting.

/** The visible control named `name`: a test id, or a role and its accessible name. */
export function control(page, name) {
  if (typeof name !== 'string') return name;
  if (name.startsWith('role=')) return page.locator(name);
  return page.getByTestId(name).first();
}

/**
 * The prompt-reading progress among texts the turn's phase line showed ("reading the prompt… 64
 * of 323 tokens (19 %)"): `[read, total]` of each, in order.
 */
export function promptReadings(phases) {
  const number = (text) => Number(text.replace(/,/g, ''));
  return phases.map((text) => /reading the prompt… ([\d,]+) of ([\d,]+) tokens/.exec(text)).filter(Boolean).map((m) => [number(m[1]), number(m[2])]);
}

export function person(page) {
  const find = (name) => control(page, name);
  const counted = { clicks: 0 };
  return {
    page,
    /** How many clicks this person made (the journeys report it). */
    get clicks() {
      return counted.clicks;
    },
    /** Clicks the control the moment it can be clicked. */
    click: (name, options = {}) => {
      counted.clicks += 1;
      return find(name).click(options);
    },
    /**
     * Types into a field (replacing what is there), as soon as it takes input. A person clicks
     * into it first: a field behind a dialog that is still open cannot be typed into.
     */
    async type(name, text) {
      await find(name).click();
      await find(name).fill(text);
    },
    /** Picks an option of a select. */
    choose: (name, value) => find(name).selectOption(value),
    check: (name, on = true) => find(name).setChecked(on),
    press: (name, key) => find(name).press(key),
    /** Opens Settings on a section (its tab), as a person clicks there. */
    async openSettings(section = 'provider') {
      await this.click('settings');
      await this.click(`settings-tab-${section}`);
    },
    /** Waits until the control is on screen (what a person waits for with their eyes). */
    see: (name, timeout = 15_000) => find(name).waitFor({ state: 'visible', timeout }),
    /** Waits until `text` is shown inside the control. */
    async seeText(name, text, timeout = 15_000) {
      const locator = find(name);
      await locator.filter({ hasText: text }).first().waitFor({ state: 'visible', timeout });
    },
    /** The text a person reads in the control. */
    read: (name) => find(name).innerText(),
    /**
     * Starts noting each text the control shows (a status line that changes while a person
     * watches); the returned function gives them in order.
     */
    async watch(name) {
      const key = `__watched_${name}`;
      await page.evaluate(({ name, key }) => {
        globalThis[key]?.observer.disconnect();
        const seen = [];
        const note = () => {
          const text = document.querySelector(`[data-testid="${name}"]`)?.textContent ?? '';
          if (text && seen.at(-1) !== text) seen.push(text);
        };
        const observer = new MutationObserver(note);
        observer.observe(document.body, { subtree: true, childList: true, characterData: true });
        globalThis[key] = { seen, observer };
      }, { name, key });
      return () => page.evaluate((key) => globalThis[key]?.seen ?? [], key);
    },
    /** The finished answers on screen (streamed ones included once they are done). */
    answers: () => page.locator('[data-testid=message][data-role=assistant]:not([data-streaming])').allInnerTexts(),
    /**
     * Waits until `n` finished answers are on screen and the chat is not busy, as a person sees
     * it: Send (not Stop) shows. Says what the page showed instead when it does not come.
     */
    async waitAnswers(n, timeout = 20_000) {
      try {
        await page.waitForFunction((count) => {
          const done = document.querySelectorAll('[data-testid=message][data-role=assistant]:not([data-streaming])').length;
          const stop = document.querySelector('[data-testid=stop]');
          return done >= count && stop?.hidden;
        }, n, { timeout });
      } catch (error) {
        const seen = await page.evaluate(() => ({
          roles: [...document.querySelectorAll('[data-testid=message]')].map((m) => m.dataset.role + (m.hasAttribute('data-streaming') ? '*' : '')),
          status: document.querySelector('[data-testid=status]')?.textContent ?? '',
          held: document.querySelector('[data-testid=held]')?.textContent ?? '',
        })).catch(() => ({}));
        throw new Error(`waited for ${n} answers: the page shows ${JSON.stringify(seen)} (${error.message.split('\n')[0]})`);
      }
    },
    /** Types a message and presses Send. */
    async send(text) {
      await this.type('composer', text);
      await this.click('send');
    },
    /** Sends, sees the message in the transcript, and waits for the answer count to reach `n`. */
    async ask(text, n, timeout = 20_000) {
      await this.send(text);
      const words = text.trim().split('\n')[0].slice(0, 60);
      await page.locator('[data-testid=message][data-role=user]').filter({ hasText: words }).last().waitFor({ timeout });
      await this.waitAnswers(n, timeout);
    },
    /** Sets a provider through Settings, as a person does, and saves. */
    async setProvider({ kind = 'openai-chat', baseUrl, model = 'gpt-4o', key = 'sk-test-CANARY', remember = false }) {
      await this.openSettings('provider');
      await find('provider-kind').selectOption(kind);
      await find('provider-base-url').fill(baseUrl);
      await find('provider-key').fill(key);
      await find('provider-model').fill(model);
      await find('remember-key').setChecked(remember);
      await this.click('save-settings');
      await page.getByTestId('settings-dialog').waitFor({ state: 'hidden' });
    },
  };
}
