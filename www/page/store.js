// The page's state (one object, `page/lifecycle.js`'s) and the one way it changes: `dispatch`
// runs the transition function, tells the views, then performs the effects through the
// performers the page's modules registered (async work that dispatches again when it is done).
import { initial, transition } from './lifecycle.js';

export function createStore() {
  let state = initial;
  const views = new Set();
  const performers = new Map();
  return {
    get state() {
      return state;
    },
    dispatch(event) {
      const result = transition(state, event);
      state = result.state;
      for (const view of views) view(state);
      for (const effect of result.effects) {
        const perform = performers.get(effect.effect);
        if (perform) Promise.resolve().then(() => perform(effect)).catch((error) => console.error(effect.effect, error));
      }
    },
    /** `view(state)` after every change. */
    watch(view) {
      views.add(view);
      view(state);
    },
    /** `perform(effect)` for each effect named `name`. */
    perform(name, perform) {
      performers.set(name, perform);
    },
  };
}
