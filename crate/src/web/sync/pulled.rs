//! What a pull changed reaches the page: the chat list, the open chats (reloaded once idle and
//! saved), a chat removed elsewhere closed, the workspace copies, and the long chats it brought
//! packed once the replication caught up.

use super::*;

/// Pulled changes reach the page: the chat list refreshes, open chats take them (now if idle and
/// saved, else when they are), a chat removed elsewhere closes.
pub(super) async fn after_pull(shared: &Handle, generation: u64, changed: Changed) {
    for chat_id in &changed.deleted {
        if shared.borrow().engine.session(chat_id).is_some() {
            feed(
                shared,
                Input::CloseChat {
                    chat_id: chat_id.clone(),
                },
            );
        }
    }
    if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
        state.reload_later.extend(changed.chats.iter().cloned());
        state.pack_later.extend(changed.unpacked.iter().cloned());
        for chat_id in &changed.deleted {
            state.pack_later.remove(chat_id);
        }
    }
    // Caught up already (the replicator said so as this batch was stored): packed now, as no
    // later `live` may come while it listens.
    if status(shared).state == "live" {
        pack_pulled(shared);
    }
    emit(
        shared,
        &json!({"type": "changed", "chats": changed.chats, "deleted": changed.deleted, "kept": changed.kept}),
    );
    reload_open_chats(shared, generation).await;
    // The workspace copy follows what came in, like a change made here (open or not).
    for chat_id in &changed.chats {
        crate::web::chat_files::saved(shared, chat_id);
    }
    // Messages kept over another device's deletion are in the outbox: pushed now, not at the
    // next local change.
    if !changed.kept.is_empty() {
        local_change(shared);
    }
}

/// The long chats pulled without a packed copy are packed, one after another, once the
/// replication has caught up — not between its batches, each of which would undo the copy — so
/// a chat that came from another device opens from one record, as one saved here does. The copy
/// only makes opening quicker: one that fails is left to the chat's first load.
pub(super) fn pack_pulled(shared: &Handle) {
    let chats = match shared.borrow_mut().sync.state.as_mut() {
        Some(state) => std::mem::take(&mut state.pack_later),
        None => return,
    };
    if chats.is_empty() {
        return;
    }
    let shared = shared.clone();
    spawn_local(async move {
        for chat_id in chats {
            let db = shared.borrow().db.clone();
            // A failure costs only the quick opening: the chat's first load packs it.
            let _ = crate::web::packed::pack_unvouched(&db, &chat_id).await;
        }
    });
}

/// Open chats owned here with pulled changes take them when idle and saved; the rest wait.
pub(super) async fn reload_open_chats(shared: &Handle, generation: u64) {
    let waiting: Vec<String> = match shared.borrow().sync.state.as_ref() {
        Some(state) if state.generation == generation => {
            state.reload_later.iter().cloned().collect()
        }
        _ => return,
    };
    let mut still = BTreeSet::new();
    for chat_id in waiting {
        let owned = {
            let s = shared.borrow();
            s.engine.session(&chat_id).is_some()
                && !matches!(s.roles.get(&chat_id), Some(ChatRole::Follower { .. }))
        };
        if !owned {
            continue;
        }
        let ready = shared
            .borrow()
            .engine
            .session(&chat_id)
            .is_some_and(|s| s.can_reload().is_ok());
        if !ready {
            still.insert(chat_id);
            continue;
        }
        match crate::web::storage::load_trajectory(shared, &chat_id).await {
            Ok((trajectory, stored)) => {
                let step = feed(
                    shared,
                    Input::ReloadChat {
                        chat_id: chat_id.clone(),
                        trajectory,
                        stored: Some(stored),
                    },
                );
                if step.errors.is_empty() {
                    crate::web::chat_files::saved(shared, &chat_id);
                } else {
                    still.insert(chat_id);
                }
            }
            Err(e) => web_sys::console::warn_2(&"palaver: sync could not reload a chat".into(), &e),
        }
    }
    let again = !still.is_empty();
    if let Some(state) = shared.borrow_mut().sync.state.as_mut() {
        state.reload_later = still;
    }
    if again {
        let shared = shared.clone();
        gloo_timers::callback::Timeout::new(1000, move || {
            spawn_local(async move { reload_open_chats(&shared, generation).await });
        })
        .forget();
    }
}
