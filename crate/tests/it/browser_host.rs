//! The browser host in headless Chromium (wasm only): real `fetch` streams against the provider
//! double (`tests/double/server.mjs`, replaying `../shared/wire` over HTTP on 127.0.0.1; its URL
//! comes from `PALAVER_DOUBLE_URL` at build time, set by `scripts/test.sh`), real IndexedDB.

use crate::support::wire;
use palaver::decode::decode_stream;
use palaver::provider::ProviderKind;
use palaver::web::host::Host;
use serde_json::{json, Value};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use wasm_bindgen_test::wasm_bindgen_test;

fn double() -> &'static str {
    match option_env!("PALAVER_DOUBLE_URL") {
        Some(url) => url,
        None => panic!("PALAVER_DOUBLE_URL is not set: run the wasm tests through scripts/test.sh, which starts the provider double"),
    }
}

async fn sleep(ms: i32) {
    let promise = js_sys::Promise::new(&mut |resolve, _| {
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(&resolve, ms);
        }
    });
    let _ = JsFuture::from(promise).await;
}

async fn fetch_json(url: &str, method: &str, body: Option<Value>) -> Value {
    let init = web_sys::RequestInit::new();
    init.set_method(method);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(&body.to_string()));
    }
    let window = web_sys::window().expect("a window");
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str_and_init(url, &init))
        .await
        .unwrap_or_else(|e| panic!("fetch {url}: {e:?}"))
        .dyn_into()
        .expect("a Response");
    let text = JsFuture::from(response.text().expect("text"))
        .await
        .ok()
        .and_then(|t| t.as_string())
        .unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

async fn promised(promise: js_sys::Promise) -> JsValue {
    JsFuture::from(promise)
        .await
        .unwrap_or_else(|e| panic!("rejected: {e:?}"))
}

fn value(js: &JsValue) -> Value {
    js_sys::JSON::stringify(js)
        .ok()
        .and_then(|s| s.as_string())
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null)
}

fn unique(name: &str) -> String {
    format!("{name}-{}", (js_sys::Math::random() * 1e12) as u64)
}

async fn open(db: &str, config: Value) -> Host {
    let config = config
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .expect("config");
    Host::open(config, Some(db.to_string()), None)
        .await
        .unwrap_or_else(|e| panic!("open: {e:?}"))
}

use serde::Serialize;

fn snapshot(host: &Host, chat: &str) -> Value {
    value(&host.snapshot(chat))
}

/// Waits (up to `ms`) until `done(snapshot)`; panics with the last snapshot otherwise.
async fn wait_for(host: &Host, chat: &str, ms: i32, done: impl Fn(&Value) -> bool) -> Value {
    let mut waited = 0;
    loop {
        let snap = snapshot(host, chat);
        if done(&snap) {
            return snap;
        }
        if waited >= ms {
            panic!("timed out; last snapshot: {snap}");
        }
        sleep(20).await;
        waited += 20;
    }
}

fn send(host: &Host, chat: &str, command: Value) -> Value {
    let js = command
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .expect("command");
    value(
        &host
            .send(chat.into(), js)
            .unwrap_or_else(|e| panic!("send: {e:?}")),
    )
}

fn state(snap: &Value) -> &str {
    snap["runtime"]["state"].as_str().unwrap_or("")
}

fn saved(snap: &Value) -> bool {
    snap["runtime"].get("storage_error").is_none()
}

const CASES: [(&str, &str); 5] = [
    ("openai-chat", "text_include_usage_gpt41"),
    ("anthropic", "cache_read_usage"),
    // Server blocks (two web search results of 16 and 23 KB) and citations, kept as their text.
    ("anthropic", "web_search_citations"),
    ("gemini", "text"),
    ("openai-responses", "text"),
];

#[wasm_bindgen_test]
async fn a_whole_turn_through_fetch_for_each_provider_survives_a_reload() {
    for (kind, case) in CASES {
        let db = unique("turn");
        let base = format!("{}/wire/{kind}/{case}", double());
        let config =
            json!({"providers": [{"kind": kind, "base_url": base, "model": "test-model"}]});
        let host = open(&db, config.clone()).await;
        host.set_provider_key(kind.into(), "sk-test-CANARY".into(), base.clone());
        let chat = promised(host.create_chat(Some("hello".into())))
            .await
            .as_string()
            .expect("an id");
        promised(host.open_chat(chat.clone())).await;
        send(
            &host,
            &chat,
            json!({"type": "set_params", "patch": {"provider": kind}}),
        );
        let ack = send(
            &host,
            &chat,
            json!({"type": "user_message", "content": "hi"}),
        );
        assert!(ack.to_string().contains("\"accepted\":true"), "{ack}");
        let snap = wait_for(&host, &chat, 10_000, |s| {
            state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 2)
        })
        .await;
        let sse = wire(&format!("{kind}/{case}.sse")).expect("transcript");
        let provider = ProviderKind::parse(kind).expect("kind");
        let expected = decode_stream(provider, &[sse.as_bytes()])
            .expect("decodes")
            .assembled
            .to_value();
        let reply = &snap["messages"][1];
        assert_eq!(reply["content"], expected["content"], "{kind}: {reply}");
        for key in ["server_content_blocks", "citations"] {
            let got = reply.get(key).cloned().unwrap_or(json!([]));
            assert_eq!(got, expected[key], "{kind}/{case}: {key}");
        }
        assert!(
            reply["usage"]["prompt_tokens"]
                .as_u64()
                .is_some_and(|t| t > 0),
            "{kind}: usage {reply}"
        );
        wait_for(&host, &chat, 5_000, |s| {
            saved(s) && s["runtime"]["state"] == "idle"
        })
        .await;
        sleep(100).await;
        let before = snap["messages"].clone();
        host.close();
        let again = open(&db, config).await;
        let reopened = value(&promised(again.open_chat(chat.clone())).await);
        assert_eq!(
            reopened["messages"], before,
            "{kind}: every message back, byte for byte"
        );
        let chats = value(&promised(again.list_chats()).await);
        assert_eq!(chats[0]["id"], json!(chat));
        assert_eq!(chats[0]["title"], "hello");
        let export = promised(again.export_chat(chat.clone(), "refact".into()))
            .await
            .as_string()
            .unwrap_or_default();
        assert!(
            export.contains("\"hi\"") && !export.contains("CANARY"),
            "exports carry no key"
        );
        again.close();
    }
}

#[wasm_bindgen_test]
async fn abort_mid_stream_cancels_the_fetch_and_keeps_the_partial() {
    let id = unique("abort");
    fetch_json(&format!("{}/__script/{id}", double()), "POST", Some(json!({"responses": [{"wire": "openai-chat/text_include_usage_gpt41", "chunk_bytes": 400, "delay_ms": 150}]}))).await;
    let db = unique("abort-db");
    let host = open(&db, json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/s/{id}", double()), "model": "m"}]})).await;
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "tell me"}),
    );
    wait_for(&host, &chat, 5_000, |s| {
        s["draft"]["content"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    })
    .await;
    send(&host, &chat, json!({"type": "abort"}));
    let snap = wait_for(&host, &chat, 2_000, |s| state(s) == "idle").await;
    let partial = &snap["messages"][1];
    assert_eq!(partial["stopped"], true, "{partial}");
    assert_eq!(partial["finish_reason"], "abort");
    let mut closed = false;
    for _ in 0..50 {
        let log = fetch_json(&format!("{}/__log/{id}", double()), "GET", None).await;
        if log[0]["closed_by_client"] == true {
            closed = true;
            break;
        }
        sleep(50).await;
    }
    assert!(closed, "the double saw the connection close");
    host.close();
}

/// SECURITY E1 in the engine itself: a key goes only to the origin it was given for, whatever
/// the settings say later. `localhost` reaches the same double as `127.0.0.1`, but is another
/// origin: the request goes, without the key.
#[wasm_bindgen_test]
async fn a_key_is_sent_only_to_the_origin_it_was_given_for() {
    let id = unique("bound");
    let answer = json!({"wire": "openai-chat/text_include_usage_gpt41"});
    fetch_json(
        &format!("{}/__script/{id}", double()),
        "POST",
        Some(json!({"responses": [answer, answer]})),
    )
    .await;
    let base = format!("{}/s/{id}", double());
    let elsewhere = base.replace("127.0.0.1", "localhost");
    let db = unique("bound");
    let host = open(
        &db,
        json!({"providers": [{"kind": "openai-chat", "base_url": elsewhere, "model": "m"}]}),
    )
    .await;
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("an id");
    promised(host.open_chat(chat.clone())).await;
    // Given for 127.0.0.1; the provider is (now) at localhost: no key goes.
    host.set_provider_key("openai-chat".into(), "sk-test-CANARY".into(), base.clone());
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "one"}),
    );
    wait_for(&host, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 2)
    })
    .await;
    // Given for localhost itself: it goes.
    host.set_provider_key(
        "openai-chat".into(),
        "sk-test-CANARY".into(),
        elsewhere.clone(),
    );
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "two"}),
    );
    wait_for(&host, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 4)
    })
    .await;
    let log = fetch_json(&format!("{}/__log/{id}", double()), "GET", None).await;
    let auth = |i: usize| {
        log[i]["headers"]["authorization"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(
        auth(0),
        "",
        "a key given for another origin was sent: {}",
        log[0]["headers"]
    );
    assert_eq!(auth(1), "Bearer sk-test-CANARY", "{}", log[1]["headers"]);
    host.close();
}

#[wasm_bindgen_test]
async fn a_stalled_stream_ends_as_stalled_after_the_timeout() {
    let id = unique("stall");
    fetch_json(&format!("{}/__script/{id}", double()), "POST", Some(json!({"responses": [{"wire": "openai-chat/text_include_usage_gpt41", "stall_after_bytes": 600}]}))).await;
    let host = open(&unique("stall-db"), json!({"stall_timeout_ms": 800, "retry": {"max_attempts": 1}, "providers": [{"kind": "openai-chat", "base_url": format!("{}/s/{id}", double()), "model": "m"}]})).await;
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "hi"}),
    );
    let snap = wait_for(&host, &chat, 5_000, |s| state(s) == "error").await;
    assert_eq!(
        snap["runtime"]["error"]["code"], "stalled",
        "{}",
        snap["runtime"]
    );
    host.close();
}

#[wasm_bindgen_test]
async fn a_long_chat_saves_incrementally_and_a_failed_save_is_kept_and_retried() {
    let db = unique("long");
    let config = json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]});
    let host = open(&db, config.clone()).await;
    let messages: Vec<Value> = (0..2000)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i} ünïcødé")}))
        .collect();
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 10_000, |s| saved(s)).await;
    sleep(300).await;
    let after_import = host.records_written();
    assert!(
        after_import >= 2000.0,
        "the import wrote every message: {after_import}"
    );
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "one more"}),
    );
    wait_for(&host, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 2002)
    })
    .await;
    sleep(300).await;
    let per_turn = host.records_written() - after_import;
    assert!(
        per_turn <= 8.0,
        "one turn writes a few small records, not the chat: {per_turn}"
    );
    // A save that fails (a quota error) is reported, kept dirty, and succeeds later.
    host.simulate_save_failure(Some(
        "QuotaExceededError: the quota has been exceeded".into(),
    ));
    host.rename_chat(chat.clone(), "renamed".into())
        .expect("rename");
    let failing = wait_for(&host, &chat, 5_000, |s| !saved(s)).await;
    assert!(
        failing["runtime"]["storage_error"]
            .as_str()
            .is_some_and(|e| e.contains("Quota")),
        "{}",
        failing["runtime"]
    );
    host.simulate_save_failure(None);
    wait_for(&host, &chat, 20_000, |s| saved(s)).await;
    sleep(200).await;
    let before = snapshot(&host, &chat)["messages"].clone();
    host.close();
    let again = open(&db, config).await;
    let reopened = value(&promised(again.open_chat(chat.clone())).await);
    assert_eq!(
        reopened["messages"], before,
        "2 002 messages back, byte for byte"
    );
    assert_eq!(
        reopened["thread"]["title"], "renamed",
        "the retried save landed"
    );
    again.close();
}

/// Issue 5's numbers, printed (not asserted on time): opening a 5 000-message chat from
/// IndexedDB, and the bytes one turn writes for a 10- and a 5 000-message chat.
#[wasm_bindgen_test]
async fn bench_open_and_bytes_per_turn() {
    // Compaction off: this measures saves (a 5 000-message chat is far over compact_at).
    let config = json!({"compact_at": null, "default_n_ctx": 10000000, "providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]});
    let mut per_turn = Vec::new();
    let mut early = Vec::new();
    for size in [10usize, 5000] {
        let db = unique("bench");
        let host = open(&db, config.clone()).await;
        let messages: Vec<Value> = (0..size)
            .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(30))}))
            .collect();
        let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
            .await
            .as_string()
            .expect("id");
        wait_for(&host, &chat, 30_000, |s| {
            saved(s) && s["runtime"]["state"] == "idle"
        })
        .await;
        sleep(500).await;
        let before = host.bytes_written();
        send(
            &host,
            &chat,
            json!({"type": "user_message", "content": "one more"}),
        );
        wait_for(&host, &chat, 10_000, |s| {
            state(s) == "idle"
                && s["messages"]
                    .as_array()
                    .is_some_and(|m| m.len() == size + 2)
        })
        .await;
        sleep(300).await;
        let bytes = host.bytes_written() - before;
        per_turn.push(bytes);
        // An early edit and an early removal: what they write must not grow with the chat.
        let ids: Vec<String> = snapshot(&host, &chat)["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|m| m["message_id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let before = host.bytes_written();
        send(
            &host,
            &chat,
            json!({"type": "update_message", "message_id": ids[4], "content": "edited early"}),
        );
        send(
            &host,
            &chat,
            json!({"type": "remove_message", "message_id": ids[3]}),
        );
        wait_for(&host, &chat, 10_000, |s| {
            saved(s)
                && s["messages"]
                    .as_array()
                    .is_some_and(|m| m.len() == size + 1)
        })
        .await;
        sleep(300).await;
        early.push(host.bytes_written() - before);
        host.close();
        if size == 5000 {
            let again = open(&db, config.clone()).await;
            let started = js_sys::Date::now();
            let snap = value(&promised(again.open_chat(chat.clone())).await);
            let ms = js_sys::Date::now() - started;
            assert_eq!(
                snap["messages"].as_array().map(Vec::len),
                Some(5001),
                "the turn added two, the early removal took one"
            );
            web_sys::console::log_1(
                &format!("BENCH open a 5000-message chat from IndexedDB: {ms:.0} ms").into(),
            );
            again.close();
        }
    }
    web_sys::console::log_1(&format!("BENCH bytes written per turn: 10-message chat {} B, 5000-message chat {} B, ratio {:.2}", per_turn[0], per_turn[1], per_turn[1] / per_turn[0]).into());
    web_sys::console::log_1(&format!("BENCH bytes written by an early edit and removal (messages 4 and 3): 10-message chat {} B, 5000-message chat {} B, ratio {:.2}", early[0], early[1], early[1] / early[0]).into());
    assert!(
        per_turn[1] < per_turn[0] * 2.0,
        "a turn's save does not grow with the chat: {per_turn:?}"
    );
    assert!(
        early[1] <= early[0] * 2.0,
        "an early edit writes what changed, not the chat after it: {early:?}"
    );
}

/// Two engines in one origin on one chat (two `Palaver` objects in this page stand for two
/// tabs: Web Locks and BroadcastChannel work across both alike). One owns, one follows;
/// commands from both are applied once, in order; both see the same events; when the owner
/// closes, the follower takes over from IndexedDB.
#[wasm_bindgen_test]
async fn two_engines_share_one_chat_and_the_follower_takes_over() {
    let db = unique("tabs");
    let config = json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]});
    let first = open(&db, config.clone()).await;
    let chat = promised(first.create_chat(Some("shared".into())))
        .await
        .as_string()
        .expect("id");
    promised(first.open_chat(chat.clone())).await;
    let second = open(&db, config.clone()).await;
    let mirrored = value(&promised(second.open_chat(chat.clone())).await);
    assert_eq!(value(&first.tab_role(&chat))["role"], "owner");
    assert_eq!(value(&second.tab_role(&chat))["role"], "follower");
    assert_eq!(
        mirrored["seq"],
        snapshot(&first, &chat)["seq"],
        "the follower starts from the owner's snapshot"
    );
    send(
        &second,
        &chat,
        json!({"type": "user_message", "content": "from the second tab"}),
    );
    wait_for(&first, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 2)
    })
    .await;
    send(
        &first,
        &chat,
        json!({"type": "user_message", "content": "from the first tab"}),
    );
    let owner = wait_for(&first, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 4)
    })
    .await;
    let follower = wait_for(&second, &chat, 5_000, |s| s["seq"] == owner["seq"]).await;
    assert_eq!(
        follower["messages"], owner["messages"],
        "both see the same chat"
    );
    let users: Vec<&str> = owner["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(
        users,
        ["from the second tab", "from the first tab"],
        "each command once, in order"
    );
    wait_for(&first, &chat, 5_000, |s| saved(s)).await;
    // A third tab follows too: when the owner goes, the tab that does not take over hears the
    // new owner and asks it for its snapshot (nothing is posted to nobody).
    let third = open(&db, config.clone()).await;
    promised(third.open_chat(chat.clone())).await;
    assert_eq!(value(&third.tab_role(&chat))["role"], "follower");
    sleep(300).await;
    first.close();
    let (second, third) = {
        let mut waited = 0;
        loop {
            if value(&second.tab_role(&chat))["role"] == "owner" {
                break (second, third);
            }
            if value(&third.tab_role(&chat))["role"] == "owner" {
                break (third, second);
            }
            assert!(waited < 5_000, "no tab took the chat over");
            sleep(50).await;
            waited += 50;
        }
    };
    let taken = snapshot(&second, &chat);
    let heard = wait_for(&third, &chat, 5_000, |s| s["seq"] == taken["seq"]).await;
    assert_eq!(
        value(&third.tab_role(&chat))["role"],
        "follower",
        "the other tab follows the new owner"
    );
    assert_eq!(heard["messages"], taken["messages"], "and has its snapshot");
    assert_eq!(
        taken["messages"], owner["messages"],
        "the new owner loaded every message"
    );
    send(
        &second,
        &chat,
        json!({"type": "user_message", "content": "after the takeover"}),
    );
    wait_for(&second, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 6)
    })
    .await;
    second.close();
    third.close();
}

/// `loadChat` opens a chat as `openChat` does but hands nothing back (the subscriber gets the
/// snapshot); `thread` is the chat's params without its messages, an owner's and a follower's.
#[wasm_bindgen_test]
async fn load_chat_opens_without_a_snapshot_and_thread_reads_params_only() {
    let db = unique("load");
    let config = json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]});
    let first = open(&db, config.clone()).await;
    let chat = promised(first.create_chat(Some("params".into())))
        .await
        .as_string()
        .expect("id");
    assert!(first.thread(&chat).is_undefined(), "not open yet");
    let loaded = promised(first.load_chat(chat.clone())).await;
    assert!(loaded.is_undefined(), "loadChat hands back nothing");
    assert_eq!(value(&first.tab_role(&chat))["role"], "owner");
    send(
        &first,
        &chat,
        json!({"type": "set_draft", "text": "half a thought"}),
    );
    let thread = value(&first.thread(&chat));
    assert_eq!(thread["title"], "params");
    assert_eq!(thread["composer_draft"], "half a thought");
    assert!(thread.get("messages").is_none(), "{thread}");
    let second = open(&db, config).await;
    promised(second.load_chat(chat.clone())).await;
    assert_eq!(value(&second.tab_role(&chat))["role"], "follower");
    assert_eq!(
        value(&second.thread(&chat))["composer_draft"],
        "half a thought"
    );
    first.close();
    second.close();
}

/// SECURITY B4: corrupt records in the middle of a stored chat are reported, the rest shown,
/// nothing deleted.
#[wasm_bindgen_test]
async fn b4_a_corrupt_stored_record_is_reported_not_dropped() {
    use palaver::web::idb;
    let db = unique("b4");
    let config = json!({});
    let host = open(&db, config.clone()).await;
    let messages: Vec<Value> = (0..5).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i}")})).collect();
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    sleep(300).await;
    let ids: Vec<String> = snapshot(&host, &chat)["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["message_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    host.close();
    // Damage two records behind the engine's back (same keys, same positions).
    let raw = idb::open(&db).await.expect("raw open");
    let tx = idb::write_transaction(&raw).expect("tx");
    let store = idb::store(&tx, idb::MESSAGES).expect("store");
    // Each damaged record keeps the position it was stored at.
    let mut position = Vec::new();
    for id in [&ids[1], &ids[3]] {
        let record = idb::request_done(&store.get(&idb::message_key(&chat, id)).expect("get"))
            .await
            .expect("read");
        position.push(idb::from_js(&record).map_or(Value::Null, |r| r["position"].clone()));
    }
    store
        .put(
            &idb::to_js(&json!({"chat_id": chat, "message_id": ids[1], "position": position[0], "message": "not a message"}))
                .expect("js"),
        )
        .expect("put");
    store
        .put(
            &idb::to_js(
                &json!({"chat_id": chat, "message_id": ids[3], "position": position[1], "message": {"role": "martian", "content": 7}}),
            )
            .expect("js"),
        )
        .expect("put");
    idb::transaction_done(&tx).await.expect("committed");
    raw.close();
    let again = open(&db, config).await;
    let snap = value(&promised(again.open_chat(chat.clone())).await);
    let all = snap["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 5, "nothing dropped: {all:?}");
    assert_eq!(all[0]["content"], "m0");
    assert_eq!(all[4]["content"], "m4");
    let notices = all
        .iter()
        .filter(|m| m["role"] == "event" && m["event"]["subkind"] == "system_notice")
        .count();
    assert_eq!(
        notices, 2,
        "each unreadable record kept as a notice: {all:?}"
    );
    // The notices are saved under their own ids and the damaged records go: a second reload
    // shows the same five messages, no duplicates.
    wait_for(&again, &chat, 5_000, |s| saved(s)).await;
    sleep(300).await;
    again.close();
    let third = open(&db, json!({})).await;
    let snap = value(&promised(third.open_chat(chat.clone())).await);
    assert_eq!(
        snap["messages"].as_array().cloned().unwrap_or_default(),
        all
    );
    third.close();
}

/// Issue 41: an open chat's export is written into JS a piece at a time (a `Blob` of 256 KB
/// pieces); it is the same text as the export of the same chat read from storage, here over
/// 600 KB of text with characters of two to four bytes across the pieces' edges.
#[wasm_bindgen_test]
async fn an_open_chats_export_in_pieces_equals_the_stored_ones() {
    let db = unique("pieces");
    let host = open(&db, json!({})).await;
    let messages: Vec<Value> = (0..12).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i} {}", "aé✓🙂".repeat(5_000 + i * 7))})).collect();
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    let _ = promised(host.open_chat(chat.clone())).await;
    let open_export = promised(host.export_chat(chat.clone(), "refact".into()))
        .await
        .as_string()
        .expect("text");
    sleep(300).await;
    host.close();
    // Another engine on the same storage, the chat not open in it: exported from the stored copy.
    let other = open(&db, json!({})).await;
    let stored_export = promised(other.export_chat(chat.clone(), "refact".into()))
        .await
        .as_string()
        .expect("text");
    assert!(open_export.len() > 600_000, "{}", open_export.len());
    assert!(
        open_export == stored_export,
        "the export in pieces differs from the stored one ({} vs {} bytes)",
        open_export.len(),
        stored_export.len()
    );
    other.close();
}

/// SECURITY B19/B20: export then import gives the same messages; a malformed import is a typed
/// error and touches nothing.
#[wasm_bindgen_test]
async fn b19_b20_export_import_round_trip_and_malformed_import() {
    let db = unique("b19");
    let host = open(&db, json!({})).await;
    let messages: Vec<Value> = (0..6).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i} ✓ {}", "é🙂".repeat(1500)), "custom": {"kept": i}})).collect();
    // Over 4 KB of non-ASCII text (surrogate pairs too): the import crosses as TextEncoder bytes.
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    let exported = promised(host.export_chat(chat.clone(), "refact".into()))
        .await
        .as_string()
        .expect("text");
    let copy = promised(host.import_chat(exported.into()))
        .await
        .as_string()
        .expect("id");
    let strip = |s: &Value| -> Vec<Value> {
        s["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut m| {
                if let Some(o) = m.as_object_mut() {
                    o.remove("message_id");
                }
                m
            })
            .collect()
    };
    assert_eq!(
        strip(&snapshot(&host, &copy)),
        strip(&snapshot(&host, &chat)),
        "the import equals the original"
    );
    let markdown = promised(host.export_chat(chat.clone(), "markdown".into()))
        .await
        .as_string()
        .unwrap_or_default();
    assert!(markdown.contains("## User") && markdown.contains("m0 ✓"));
    let openai = promised(host.export_chat(chat.clone(), "openai".into()))
        .await
        .as_string()
        .unwrap_or_default();
    assert!(serde_json::from_str::<Value>(&openai)
        .is_ok_and(|v| v.as_array().is_some_and(|a| a.len() == 6)));
    let before = value(&promised(host.list_chats()).await);
    let bad = JsFuture::from(host.import_chat("{\"messages\": 7}".into())).await;
    let err = bad.expect_err("a malformed import is refused");
    let name = js_sys::Reflect::get(&err, &"name".into())
        .ok()
        .and_then(|n| n.as_string());
    assert!(
        name.as_deref() == Some("BadTrajectory") || name.as_deref() == Some("BadInput"),
        "{err:?}"
    );
    let after = value(&promised(host.list_chats()).await);
    assert_eq!(before, after, "existing data untouched");
    host.close();
}

/// An import resolves once the chat is stored, with its title: a page that closes right after it
/// loses nothing. Two `openChat` calls for one chat at once open it once.
#[wasm_bindgen_test]
async fn an_import_is_stored_when_it_resolves_and_concurrent_opens_open_once() {
    let db = unique("import-durable");
    let host = open(&db, json!({})).await;
    let trajectory = json!({"title": "Imported ✓", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]});
    let chat = promised(host.import_chat(trajectory.to_string().into()))
        .await
        .as_string()
        .expect("id");
    host.close();
    let host = open(&db, json!({})).await;
    let chats = value(&promised(host.list_chats()).await);
    let listed = chats
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == json!(chat)).cloned())
        .expect("the imported chat is stored");
    assert_eq!(listed["title"], "Imported ✓", "{listed}");
    assert_eq!(listed["message_count"], 2, "{listed}");
    let both = js_sys::Promise::all(&js_sys::Array::of2(
        &host.open_chat(chat.clone()),
        &host.open_chat(chat.clone()),
    ));
    let both = value(&promised(both).await);
    assert_eq!(both[0]["messages"], both[1]["messages"]);
    assert_eq!(both[0]["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(value(&host.tab_role(&chat))["role"], "owner");
    promised(host.flush()).await;
    host.close();
}

/// SECURITY B21: without Web Locks a single tab still works and says why.
#[wasm_bindgen_test]
async fn b21_without_web_locks_one_tab_works_and_says_why() {
    let navigator =
        js_sys::Reflect::get(&js_sys::global(), &"navigator".into()).expect("navigator");
    let descriptor = js_sys::Object::new();
    js_sys::Reflect::set(&descriptor, &"value".into(), &JsValue::UNDEFINED).expect("set");
    js_sys::Reflect::set(&descriptor, &"configurable".into(), &JsValue::TRUE).expect("set");
    js_sys::Object::define_property(&navigator.clone().into(), &"locks".into(), &descriptor);
    let host = open(&unique("b21"), json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]})).await;
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    let role = value(&host.tab_role(&chat));
    // Put Web Locks back for the other tests before asserting.
    js_sys::Reflect::delete_property(&navigator.into(), &"locks".into()).expect("restore");
    assert_eq!(role["role"], "owner");
    assert!(
        role["note"]
            .as_str()
            .is_some_and(|n| n.contains("Web Locks")),
        "{role}"
    );
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "hi"}),
    );
    wait_for(&host, &chat, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 2)
    })
    .await;
    host.close();
}

fn fail_halfway(db: &web_sys::IdbDatabase, _tx: &web_sys::IdbTransaction) -> Result<(), JsValue> {
    // Half of a step: a store is created, then the step throws.
    let _ = db.create_object_store("half_done");
    Err(JsValue::from_str("injected migration failure"))
}

fn noop(_db: &web_sys::IdbDatabase, _tx: &web_sys::IdbTransaction) -> Result<(), JsValue> {
    Ok(())
}

static V1: [palaver::web::idb::Migration; 1] = [palaver::web::idb::create_v1];
static V2_THEN_FAIL: [palaver::web::idb::Migration; 3] = [
    palaver::web::idb::create_v1,
    palaver::web::idb::index_chats_by_update,
    fail_halfway,
];
static V2: [palaver::web::idb::Migration; 2] = [
    palaver::web::idb::create_v1,
    palaver::web::idb::index_chats_by_update,
];
static V3_THEN_FAIL: [palaver::web::idb::Migration; 4] = [
    palaver::web::idb::create_v1,
    palaver::web::idb::index_chats_by_update,
    palaver::web::idb::key_messages_by_id,
    fail_halfway,
];
static NEWER: [palaver::web::idb::Migration; 6] = [
    palaver::web::idb::create_v1,
    palaver::web::idb::index_chats_by_update,
    palaver::web::idb::key_messages_by_id,
    palaver::web::idb::create_sync_stores,
    palaver::web::idb::create_packed_store,
    noop,
];

/// A v1-shaped database (old records written by the v1 schema), as an older build left it.
async fn v1_database(db: &str, chat: &str) {
    use palaver::web::idb;
    let raw = idb::open_with(db, &V1).await.expect("v1 open");
    assert_eq!(raw.version() as u32, 1);
    let tx = idb::write_transaction(&raw).expect("tx");
    idb::store(&tx, idb::CHATS).expect("chats").put(&idb::to_js(&json!({"id": chat, "title": "old", "thread": {"title": "old"}, "message_count": 2, "version": 3, "updated_at": 1})).expect("js")).expect("put");
    let messages = idb::store(&tx, idb::MESSAGES).expect("messages");
    for (i, text) in ["question", "answer"].iter().enumerate() {
        let role = if i == 0 { "user" } else { "assistant" };
        messages.put(&idb::to_js(&json!({"chat_id": chat, "index": i, "message": {"message_id": format!("m{i}"), "role": role, "content": text}})).expect("js")).expect("put");
    }
    idb::transaction_done(&tx).await.expect("committed");
    raw.close();
}

/// SECURITY B12/B13: a v1 database migrates to the current schema with its data; a migration
/// that throws halfway leaves the database at its old version, data intact, and the next open
/// (with the good steps) succeeds.
#[wasm_bindgen_test]
async fn b12_b13_migrations_keep_data_and_a_failing_step_rolls_back() {
    use palaver::web::idb;
    let db = unique("b12");
    v1_database(&db, "old-chat").await;
    let failed = idb::open_with(&db, &V2_THEN_FAIL).await;
    assert!(failed.is_err(), "the failing upgrade is refused");
    let raw = idb::open_with(&db, &V1)
        .await
        .expect("still openable at v1");
    assert_eq!(
        raw.version() as u32,
        1,
        "the failed upgrade rolled back entirely"
    );
    let names = js_sys::Reflect::get(&raw, &"objectStoreNames".into()).expect("names");
    let has_half = js_sys::Reflect::get(&names, &"contains".into())
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .and_then(|f| f.call1(&names, &"half_done".into()).ok())
        .and_then(|v| v.as_bool());
    assert_eq!(has_half, Some(false), "nothing of the half step remains");
    raw.close();
    let host = open(&db, json!({})).await;
    let snap = value(&promised(host.open_chat("old-chat".into())).await);
    assert_eq!(snap["messages"][0]["content"], "question");
    assert_eq!(snap["messages"][1]["content"], "answer");
    assert_eq!(snap["thread"]["title"], "old");
    host.close();
    let raw = idb::open(&db).await.expect("current");
    assert_eq!(raw.version() as u32, idb::SCHEMA_VERSION);
    let tx = idb::read_transaction(&raw).expect("tx");
    assert!(
        idb::store(&tx, idb::CHATS)
            .expect("chats")
            .index("updated_at")
            .is_ok(),
        "v2's index exists"
    );
    raw.close();
}

/// A v2 database as the previous build left it: records keyed `[chat_id, index]`, one chat of
/// four visible messages (one without an id, one repeating another's id, one unreadable) and a
/// stale record past the chat's count (a truncation's leftover, never shown).
async fn v2_database(db: &str, chat: &str) {
    use palaver::web::idb;
    let raw = idb::open_with(db, &V2).await.expect("v2 open");
    assert_eq!(raw.version() as u32, 2);
    let tx = idb::write_transaction(&raw).expect("tx");
    idb::store(&tx, idb::CHATS).expect("chats").put(&idb::to_js(&json!({"id": chat, "title": "v2 chat", "thread": {"title": "v2 chat"}, "message_count": 4, "version": 9, "updated_at": 1})).expect("js")).expect("put");
    let rows = [
        json!({"message_id": "a", "role": "user", "content": "first"}),
        json!({"role": "assistant", "content": "second, no id"}),
        json!({"message_id": "a", "role": "user", "content": "third, a repeated id"}),
        json!("fourth, unreadable"),
        json!({"message_id": "stale", "role": "assistant", "content": "truncated long ago"}),
    ];
    let messages = idb::store(&tx, idb::MESSAGES).expect("messages");
    for (i, message) in rows.iter().enumerate() {
        messages
            .put(
                &idb::to_js(&json!({"chat_id": chat, "index": i, "message": message})).expect("js"),
            )
            .expect("put");
    }
    idb::transaction_done(&tx).await.expect("committed");
    raw.close();
}

fn contents(snap: &Value) -> Vec<String> {
    snap["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Issue 20: v2 records (keyed by index) migrate to v3 (keyed by message id, ordered by
/// position): every visible message opens in order, ids unique, the unreadable one kept as a
/// notice, the stale one still hidden; a migration that fails after v3's copy rolls back to v2
/// with every record as it was; after the migration an early removal writes no later record.
#[wasm_bindgen_test]
async fn v2_records_migrate_to_message_keys_and_a_failed_migration_rolls_back() {
    use palaver::web::idb;
    let db = unique("v3");
    v2_database(&db, "old").await;
    assert!(
        idb::open_with(&db, &V3_THEN_FAIL).await.is_err(),
        "the failing upgrade is refused"
    );
    let raw = idb::open_with(&db, &V2)
        .await
        .expect("still openable at v2");
    assert_eq!(raw.version() as u32, 2, "rolled back to v2");
    let tx = idb::read_transaction(&raw).expect("tx");
    let rows = idb::request_done(
        &idb::store(&tx, idb::MESSAGES)
            .expect("store")
            .get_all()
            .expect("all"),
    )
    .await
    .expect("read");
    assert_eq!(
        js_sys::Array::from(&rows).length(),
        5,
        "every v2 record is still there"
    );
    raw.close();

    let host = open(&db, json!({})).await;
    let snap = value(&promised(host.open_chat("old".into())).await);
    let got = contents(&snap);
    assert_eq!(
        got.len(),
        4,
        "the four visible messages, not the stale one: {got:?}"
    );
    assert_eq!(got[0], "first");
    assert_eq!(got[1], "second, no id");
    assert_eq!(got[2], "third, a repeated id");
    assert!(got[3].contains("fourth, unreadable"), "{got:?}");
    assert_eq!(snap["thread"]["title"], "v2 chat");
    let ids: std::collections::HashSet<&str> = snap["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["message_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 4, "ids are unique: {ids:?}");
    wait_for(&host, "old", 5_000, |s| saved(s)).await;
    sleep(200).await;
    let first_id = snap["messages"][0]["message_id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let before = host.records_written();
    send(
        &host,
        "old",
        json!({"type": "remove_message", "message_id": first_id}),
    );
    wait_for(&host, "old", 5_000, |s| {
        saved(s) && s["messages"].as_array().is_some_and(|m| m.len() == 3)
    })
    .await;
    sleep(200).await;
    assert_eq!(
        host.records_written() - before,
        1.0,
        "one save: the chat record, no message record"
    );
    host.close();
    let again = open(&db, json!({})).await;
    let snap = value(&promised(again.open_chat("old".into())).await);
    assert_eq!(
        contents(&snap)[..2],
        got[1..3],
        "the rest in order after a reload"
    );
    assert_eq!(contents(&snap).len(), 3);
    again.close();
}

/// SECURITY B10: a newer schema opened elsewhere makes this engine close its database at once
/// (the upgrade is not blocked); its later saves fail visibly instead of writing.
#[wasm_bindgen_test]
async fn b10_a_newer_schema_elsewhere_closes_this_database() {
    use palaver::web::idb;
    let db = unique("b10");
    let host = open(&db, json!({})).await;
    let chat = promised(host.create_chat(Some("t".into())))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    let upgraded = idb::open_with(&db, &NEWER)
        .await
        .expect("the upgrade is not blocked by the open engine");
    assert_eq!(upgraded.version(), NEWER.len() as f64);
    upgraded.close();
    host.rename_chat(chat.clone(), "after the upgrade".into())
        .expect("rename");
    let snap = wait_for(&host, &chat, 5_000, |s| !saved(s)).await;
    assert!(snap["runtime"]["storage_error"]
        .as_str()
        .is_some_and(|e| !e.is_empty()));
    host.close();
}

/// SECURITY B16–B18: the storage status says whether the browser keeps our data and how full it
/// is; a database that vanished behind our back (deleted out of band while the marker says data
/// existed) is reported as lost, not treated as a new user.
#[wasm_bindgen_test]
async fn b16_b18_storage_status_and_silent_loss() {
    let db = unique("b18");
    let host = open(&db, json!({})).await;
    let fresh = value(&promised(host.storage_status()).await);
    assert_eq!(fresh["data_lost"], false, "{fresh}");
    assert!(fresh["quota"].as_f64().is_some_and(|q| q > 0.0), "{fresh}");
    assert!(fresh.get("near_quota").is_some() && fresh.get("persisted").is_some());
    let messages = json!([{"role": "user", "content": "keep me"}]);
    let chat = promised(host.import_chat(messages.to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    sleep(200).await;
    host.close();
    // The browser evicts the database.
    let factory = web_sys::window()
        .and_then(|w| w.indexed_db().ok().flatten())
        .expect("idb");
    let deleting = factory.delete_database(&db).expect("delete");
    palaver::web::idb::request_done(&deleting)
        .await
        .expect("deleted");
    let again = open(&db, json!({})).await;
    let status = value(&promised(again.storage_status()).await);
    assert_eq!(
        status["data_lost"], true,
        "loud, not a silent fresh start: {status}"
    );
    again.close();
}

/// SECURITY D21/B3 (as far as one page can): the engine goes away mid-stream — its fetch cut,
/// its database closed, no final save — and the next engine finds the reply `interrupted` with
/// the text of its last checkpoint, not a perpetual "generating".
#[wasm_bindgen_test]
async fn d21_an_engine_gone_mid_stream_leaves_an_interrupted_reply() {
    let id = unique("d21");
    fetch_json(&format!("{}/__script/{id}", double()), "POST", Some(json!({"responses": [{"wire": "openai-chat/text_include_usage_gpt41", "chunk_bytes": 1500, "delay_ms": 500}]}))).await;
    let db = unique("d21-db");
    let config = json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/s/{id}", double()), "model": "m"}]});
    let host = open(&db, config.clone()).await;
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "write a lot"}),
    );
    wait_for(&host, &chat, 10_000, |s| {
        s["draft"]["content"].as_str().is_some_and(|c| c.len() > 20)
    })
    .await;
    sleep(3_500).await;
    let streamed = snapshot(&host, &chat)["draft"]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert_eq!(
        state(&snapshot(&host, &chat)),
        "generating",
        "still streaming when it dies"
    );
    host.close();
    let again = open(&db, config).await;
    let snap = value(&promised(again.open_chat(chat.clone())).await);
    let reply = snap["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(reply["interrupted"], true, "{reply}");
    let kept = reply["content"].as_str().unwrap_or("");
    assert!(
        !kept.is_empty() && streamed.starts_with(kept),
        "kept a prefix of what was shown: {kept:?} / {streamed:?}"
    );
    assert_eq!(state(&snap), "idle");
    again.close();
}

/// SECURITY B11: another tab holds the old schema and ignores `versionchange`: the open says it
/// is blocked and why, and completes by itself once that tab closes.
#[wasm_bindgen_test]
async fn b11_a_blocked_upgrade_is_visible_and_resumes() {
    let db = unique("b11");
    let factory = web_sys::window()
        .and_then(|w| w.indexed_db().ok().flatten())
        .expect("idb");
    // An old tab: schema v1, no versionchange handler.
    let request = factory.open_with_u32(&db, 1).expect("open v1");
    let upgrade = request.clone();
    let on_upgrade = Closure::<dyn FnMut()>::new(move || {
        if let Ok(db) = upgrade
            .result()
            .and_then(|r| r.dyn_into::<web_sys::IdbDatabase>().map_err(JsValue::from))
        {
            let _ = palaver::web::idb::create_v1(&db, &upgrade.transaction().expect("tx"));
        }
    });
    request.set_onupgradeneeded(Some(on_upgrade.as_ref().unchecked_ref()));
    let old: web_sys::IdbDatabase = palaver::web::idb::request_done(&request)
        .await
        .expect("v1")
        .dyn_into()
        .expect("db");
    drop(on_upgrade);
    let told = std::rc::Rc::new(std::cell::RefCell::new(String::new()));
    let heard = told.clone();
    let on_blocked = Closure::<dyn FnMut(JsValue)>::new(move |message: JsValue| {
        *heard.borrow_mut() = message.as_string().unwrap_or_default();
    });
    let callback: js_sys::Function = on_blocked
        .as_ref()
        .unchecked_ref::<js_sys::Function>()
        .clone();
    let opening = wasm_bindgen_futures::future_to_promise({
        let db = db.clone();
        async move {
            Host::open(JsValue::UNDEFINED, Some(db), Some(callback))
                .await
                .map(JsValue::from)
        }
    });
    let mut waited = 0;
    while told.borrow().is_empty() && waited < 3000 {
        sleep(20).await;
        waited += 20;
    }
    assert!(
        told.borrow().contains("another tab"),
        "blocked is visible: {:?}",
        told.borrow()
    );
    old.close();
    let host = JsFuture::from(opening).await;
    assert!(
        host.is_ok(),
        "the upgrade completed once the old tab closed"
    );
    drop(on_blocked);
}

/// SECURITY B9: two engines on different chats of one database write at the same time; both
/// complete, nothing crosses over.
#[wasm_bindgen_test]
async fn b9_two_engines_on_different_chats_write_concurrently() {
    let db = unique("b9");
    let config = json!({"providers": [{"kind": "openai-chat", "base_url": format!("{}/wire/openai-chat/text_gpt4o", double()), "model": "m"}]});
    let first = open(&db, config.clone()).await;
    let second = open(&db, config.clone()).await;
    let batch = |tag: &str| {
        let messages: Vec<Value> = (0..500).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("{tag} {i}")})).collect();
        Value::Array(messages).to_string()
    };
    let a = first.import_chat(batch("A").into());
    let b = second.import_chat(batch("B").into());
    let a = promised(a).await.as_string().expect("a");
    let b = promised(b).await.as_string().expect("b");
    send(
        &first,
        &a,
        json!({"type": "user_message", "content": "A more"}),
    );
    send(
        &second,
        &b,
        json!({"type": "user_message", "content": "B more"}),
    );
    wait_for(&first, &a, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 502) && saved(s)
    })
    .await;
    wait_for(&second, &b, 10_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 502) && saved(s)
    })
    .await;
    sleep(300).await;
    first.close();
    second.close();
    let check = open(&db, config).await;
    for (chat, tag) in [(&a, "A"), (&b, "B")] {
        let snap = value(&promised(check.open_chat(chat.clone())).await);
        let all = snap["messages"].as_array().cloned().unwrap_or_default();
        assert_eq!(all.len(), 502, "{tag}");
        assert!(
            all[..500]
                .iter()
                .all(|m| m["content"].as_str().is_some_and(|c| c.starts_with(tag))),
            "no cross-chat writes in {tag}"
        );
    }
    check.close();
}

/// Issue 15: the browser host-tool path, end to end — `registerHostTool` → the model calls it →
/// `ide_tool_required` → the page's function runs → `ide_tool_result` → the next round carries
/// its answer to the model.
#[wasm_bindgen_test]
async fn a_registered_host_tool_answers_the_models_call() {
    use crate::support::harness::openai_reply;
    let id = unique("hosttool");
    let call = openai_reply(
        &json!({"tool_calls": [{"id": "call_tab", "name": "read_tab", "arguments": {"which": "current"}}]}),
    );
    let answer = openai_reply(&json!({"text": "The tab is x."}));
    let sse = json!({"content-type": "text/event-stream"});
    fetch_json(&format!("{}/__script/{id}", double()), "POST", Some(json!({"responses": [{"body": call, "headers": sse}, {"body": answer, "headers": sse}]}))).await;
    let db = unique("hosttool-db");
    let host = open(&db, json!({
        "providers": [{"kind": "openai-chat", "base_url": format!("{}/s/{id}", double()), "model": "m"}],
        "host_tools": [{"name": "read_tab", "description": "Read the current tab", "parameters": {"type": "object"}}],
    })).await;
    let run = js_sys::Function::new_with_args(
        "args",
        "return Promise.resolve('<title>x</title> for ' + args.which)",
    );
    host.register_host_tool("read_tab".into(), run);
    let chat = promised(host.create_chat(None))
        .await
        .as_string()
        .expect("id");
    promised(host.open_chat(chat.clone())).await;
    send(
        &host,
        &chat,
        json!({"type": "user_message", "content": "what tab?"}),
    );
    let snap = wait_for(&host, &chat, 8_000, |s| {
        state(s) == "idle" && s["messages"].as_array().is_some_and(|m| m.len() == 4)
    })
    .await;
    let tool = &snap["messages"][2];
    assert_eq!(
        (tool["role"].clone(), tool["tool_call_id"].clone()),
        (json!("tool"), json!("call_tab")),
        "{snap}"
    );
    assert_eq!(tool["content"], "<title>x</title> for current");
    assert_eq!(snap["messages"][3]["content"], "The tab is x.");
    let log = fetch_json(&format!("{}/__log/{id}", double()), "GET", None).await;
    let second = log[1]["body"]["messages"].to_string();
    assert!(
        second.contains("<title>x</title> for current"),
        "the answer reached the model: {second}"
    );
    assert!(
        log[0]["body"]["tools"].to_string().contains("read_tab"),
        "the host tool is offered"
    );
    host.close();
}

/// One record of `store` as stored, read behind the engine's back.
async fn raw_get(db: &str, store: &str, key: &str) -> Value {
    palaver::web::idb::from_js(&raw_get_js(db, store, key).await).unwrap_or(Value::Null)
}

async fn raw_get_js(db: &str, store: &str, key: &str) -> JsValue {
    use palaver::web::idb;
    let raw = idb::open(db).await.expect("raw open");
    let tx = idb::read_transaction(&raw).expect("tx");
    let found = idb::request_done(
        &idb::store(&tx, store)
            .expect("store")
            .get(&JsValue::from_str(key))
            .expect("get"),
    )
    .await
    .expect("read");
    raw.close();
    found
}

/// The chat's packed copy as stored (`None` when it has none).
/// A chat's packed copy as text, when there is one written as this build writes it: UTF-8 bytes.
async fn packed_copy(db: &str, chat: &str) -> Option<String> {
    let copy = raw_get_js(db, palaver::web::idb::PACKED, chat).await;
    let rows = js_sys::Reflect::get(&copy, &"rows".into()).ok()?;
    let bytes = rows.dyn_into::<js_sys::Uint8Array>().ok()?;
    String::from_utf8(bytes.to_vec()).ok()
}

/// Puts one record into `store` behind the engine's back.
async fn put_raw(db: &str, store: &str, record: Value) {
    use palaver::web::idb;
    let raw = idb::open(db).await.expect("raw open");
    let tx = idb::write_transaction(&raw).expect("tx");
    idb::store(&tx, store)
        .expect("store")
        .put(&idb::to_js(&record).expect("js"))
        .expect("put");
    idb::transaction_done(&tx).await.expect("committed");
    raw.close();
}

/// A chat's messages as a fresh tab opens it.
async fn opened(db: &str, chat: &str) -> Value {
    let host = open(db, json!({})).await;
    let messages = value(&promised(host.open_chat(chat.to_string())).await)["messages"].clone();
    wait_for(&host, chat, 5_000, |s| saved(s)).await;
    sleep(300).await;
    host.close();
    messages
}

fn notices(messages: &Value) -> usize {
    messages.as_array().map_or(0, |m| {
        m.iter()
            .filter(|m| m["role"] == "event" && m["event"]["subkind"] == "system_notice")
            .count()
    })
}

/// Issue 41: a long chat is read from one packed record, written by the load that read its
/// message records; each later save lists on the chat's record what it wrote, and a load reads
/// the copy plus those records; a record that does not vouch for the copy, or a copy that does
/// not read, sends the load back to the records (which it packs again).
#[wasm_bindgen_test]
async fn a_long_chat_opens_from_its_packed_copy_and_the_records_written_since() {
    use palaver::web::idb;
    let db = unique("packed");
    let count = 210; // over the host's PACK_FROM (200)
    let messages: Vec<Value> = (0..count).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i}")})).collect();
    let host = open(&db, json!({})).await;
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    // A short chat's save writes no copy.
    let short = promised(
        host.import_chat(
            json!([{"role": "user", "content": "hi"}])
                .to_string()
                .into(),
        ),
    )
    .await
    .as_string()
    .expect("id");
    wait_for(&host, &short, 5_000, |s| saved(s)).await;
    sleep(300).await;
    host.close();
    // The import saved the whole chat at once, and its copy with its records: the first load
    // reads one record too.
    let copy = packed_copy(&db, &chat)
        .await
        .expect("the import's save packed the chat");
    let rows: Vec<Value> = serde_json::from_str(&copy).expect("rows");
    assert_eq!(rows.len(), count);
    assert_eq!(
        raw_get(&db, idb::CHATS, &chat).await["packed_changes"],
        json!([])
    );

    let first = opened(&db, &chat).await;
    let contents: Vec<&Value> = first
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| &m["content"])
        .collect();
    assert_eq!(contents.len(), count);
    assert_eq!(contents[count - 1], &json!(format!("m{}", count - 1)));
    assert_eq!(
        packed_copy(&db, &chat).await.as_deref(),
        Some(copy.as_str()),
        "read from the copy, not packed again"
    );
    assert_eq!(
        packed_copy(&db, &short).await,
        None,
        "no copy under PACK_FROM"
    );
    let ids: Vec<String> = first
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["message_id"].as_str().map(String::from))
        .collect();

    // A record damaged behind the engine's back (no save listed it): the load reads the copy.
    let damaged = json!({"chat_id": chat, "message_id": ids[5], "position": rows[5]["position"], "message": "not a message"});
    put_raw(&db, idb::MESSAGES, damaged).await;
    assert_eq!(opened(&db, &chat).await, first, "read from the copy");

    // Saves list what they write; the copy stays, and a load puts those records in, in order.
    let second = open(&db, json!({})).await;
    promised(second.open_chat(chat.clone())).await;
    send(
        &second,
        &chat,
        json!({"type": "remove_message", "message_id": ids[0]}),
    );
    send(
        &second,
        &chat,
        json!({"type": "update_message", "message_id": ids[7], "content": "edited"}),
    );
    let expected = wait_for(&second, &chat, 5_000, |s| {
        saved(s)
            && s["messages"]
                .as_array()
                .is_some_and(|m| m.len() == count - 1)
            && s["messages"][6]["content"] == "edited"
    })
    .await["messages"]
        .clone();
    sleep(300).await;
    second.close();
    assert_eq!(
        packed_copy(&db, &chat).await.as_deref(),
        Some(copy.as_str()),
        "the copy stays"
    );
    assert_eq!(
        raw_get(&db, idb::CHATS, &chat).await["packed_changes"],
        json!([ids[0], ids[7]])
    );
    let merged = opened(&db, &chat).await;
    assert_eq!(merged, expected, "the copy and the records written since");
    // A copy an earlier build wrote as a string is read as well.
    put_raw(&db, idb::PACKED, json!({"chat_id": chat, "rows": copy})).await;
    assert_eq!(
        opened(&db, &chat).await,
        expected,
        "a copy stored as a string"
    );
    assert_eq!(
        packed_copy(&db, &chat).await,
        None,
        "that copy was not rewritten"
    );
    assert_eq!(
        notices(&merged),
        0,
        "the damaged record is still behind the copy"
    );

    // A chat record that does not vouch for the copy (as an older build writes it): the records
    // are read (the damaged one shows as a notice) and packed again.
    let mut record = raw_get(&db, idb::CHATS, &chat).await;
    record
        .as_object_mut()
        .expect("record")
        .remove("packed_changes");
    put_raw(&db, idb::CHATS, record).await;
    let reread = opened(&db, &chat).await;
    assert_eq!(notices(&reread), 1, "the records were read: {reread}");
    assert!(packed_copy(&db, &chat).await.is_some(), "packed again");

    // A copy that does not read is passed over for the records.
    put_raw(
        &db,
        idb::PACKED,
        json!({"chat_id": chat, "rows": "[{\"broken"}),
    )
    .await;
    let last = opened(&db, &chat).await;
    assert_eq!(last, reread);
}

/// Issue 41: a request or transaction awaited keeps no handler on it afterwards — one left
/// behind (an `onerror` that never fired) held the request and so its result, every row a
/// `getAll` read, for the life of the page. Checked on success and on failure, and on a cursor.
#[wasm_bindgen_test]
async fn an_awaited_request_or_transaction_keeps_no_handler() {
    use palaver::web::idb;
    let raw = idb::open(&unique("handlers")).await.expect("open");
    let tx = idb::write_transaction(&raw).expect("tx");
    let store = idb::store(&tx, idb::CHATS).expect("store");
    let put = store
        .put(&idb::to_js(&json!({"id": "a"})).expect("js"))
        .expect("put");
    idb::request_done(&put).await.expect("put done");
    let twice = store
        .add(&idb::to_js(&json!({"id": "a"})).expect("js"))
        .expect("add");
    assert!(
        idb::request_done(&twice).await.is_err(),
        "a second add of one key fails"
    );
    let cursor = store.open_cursor().expect("cursor");
    let _ = idb::request_done(&cursor).await;
    for request in [&put, &twice, &cursor] {
        assert!(request.onsuccess().is_none(), "onsuccess left on a request");
        assert!(request.onerror().is_none(), "onerror left on a request");
    }
    let _ = idb::transaction_done(&tx).await;
    assert!(tx.oncomplete().is_none() && tx.onerror().is_none() && tx.onabort().is_none());
    raw.close();
}

/// Issue 41: a subscriber may ask for only a long chat's end whole (`window`): the snapshot's
/// earlier messages come light — id, role, tool calls' ids, `light: true`, no text — and
/// `messages(from, to)` gives them whole, as the full snapshot has them; the owner's and a
/// following tab's alike.
#[wasm_bindgen_test]
async fn a_subscriber_gets_a_long_chats_end_whole_and_the_rest_when_asked() {
    let db = unique("window");
    let host = open(&db, json!({})).await;
    let messages: Vec<Value> = (0..10).map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i}")})).collect();
    let chat = promised(host.import_chat(Value::Array(messages).to_string().into()))
        .await
        .as_string()
        .expect("id");
    wait_for(&host, &chat, 5_000, |s| saved(s)).await;
    let second = open(&db, json!({})).await;
    promised(second.load_chat(chat.clone())).await;
    for (tab, name) in [(&host, "owner"), (&second, "follower")] {
        let whole = value(&tab.snapshot(&chat))["messages"].clone();
        let seen = js_sys::Array::new();
        let push = js_sys::Function::new_with_args("e", "this.push(e)").bind(&seen);
        let id = tab.subscribe(chat.clone(), push, None, Some(3));
        tab.unsubscribe(id);
        let snapshot = value(&seen.get(0));
        let windowed = snapshot["messages"].as_array().expect("messages").clone();
        assert_eq!(windowed.len(), 10, "{name}");
        for (i, message) in windowed.iter().enumerate() {
            if i < 7 {
                assert_eq!(message["light"], true, "{name} {i}: {message}");
                assert!(message.get("content").is_none(), "{name} {i}: {message}");
                assert_eq!(message["message_id"], whole[i]["message_id"]);
                assert_eq!(message["role"], whole[i]["role"]);
            } else {
                assert_eq!(message, &whole[i], "{name} {i}");
            }
        }
        let asked = value(&tab.messages(&chat, 2, 5));
        assert_eq!(
            asked,
            json!(whole.as_array().expect("whole")[2..5]),
            "{name}"
        );
        assert_eq!(
            value(&tab.messages(&chat, 8, 99)),
            json!(whole.as_array().expect("whole")[8..]),
            "{name}"
        );
        assert_eq!(value(&tab.messages(&chat, 9, 3)), json!([]), "{name}");
    }
    host.close();
    second.close();
}
