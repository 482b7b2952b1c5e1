//! Tolerant loading of a stored trajectory (SPEC §4): read once from its text, unknown keys kept,
//! missing ids made deterministically, a message that does not parse kept as a `system_notice`
//! holding its raw JSON, and every repair reported.

use super::*;

/// A loaded trajectory: thread, messages (repaired) and notes on what was repaired.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub thread: ThreadParams,
    pub messages: Vec<ChatMessage>,
    pub notes: Vec<String>,
    /// The id of a checkpointed streaming reply recovered as an interrupted message (the page
    /// went away mid-stream): it must be saved as a message and its checkpoint cleared.
    pub recovered_draft: Option<String>,
}

/// Loads a Refact-style trajectory (`{id, title, model, messages, …}`) or a bare message array.
pub fn load(chat_id: &str, value: &Value) -> Result<Loaded, Refusal> {
    match value {
        Value::Array(items) => Ok(assemble(
            chat_id,
            items.iter().map(read_value),
            ThreadParams::default(),
            None,
        )),
        Value::Object(map) => {
            let items = map
                .get("messages")
                .and_then(Value::as_array)
                .ok_or_else(no_messages)?;
            Ok(assemble(
                chat_id,
                items.iter().map(read_value),
                thread_from(map),
                map.get("draft"),
            ))
        }
        _ => Err(not_a_trajectory()),
    }
}

/// `load` from JSON text, typed: each message is read straight into the message model, with no
/// `Value` built for it. The common case is one pass: the whole text read with its messages
/// typed in place. A trajectory with a message that does not read (or nested too deep to read in
/// place) is read again tolerantly: its messages kept as texts, each read on its own, so one bad
/// message cannot fail the others (a message that still does not read is parsed once more, to
/// keep it raw). The trajectory's other keys (thread params, the draft) are few and small and go
/// through `Value`. The result equals `load` of the parsed text.
pub fn load_text(chat_id: &str, text: &str) -> Result<Loaded, Refusal> {
    let top = read_top(text, Reading::Typed)
        .or_else(|_| read_top(text, Reading::Tolerant))
        .map_err(|e| Refusal::BadTrajectory {
            reason: format!("the trajectory is not JSON: {e}"),
        })?;
    let (items, rest) = match top {
        TopLevel::Messages(items) => (Some(items), None),
        TopLevel::Trajectory { messages, rest } => (messages, Some(rest)),
        TopLevel::Other => return Err(not_a_trajectory()),
    };
    let items = items.ok_or_else(no_messages)?;
    let thread = rest.as_ref().map(thread_from).unwrap_or_default();
    let draft = rest.as_ref().and_then(|rest| rest.get("draft"));
    Ok(match items {
        Items::Typed(messages) => assemble(chat_id, messages.into_iter().map(Ok), thread, draft),
        Items::Texts(texts) => assemble(chat_id, texts.into_iter().map(read_raw), thread, draft),
    })
}

fn read_top(text: &str, reading: Reading) -> serde_json::Result<TopLevel<'_>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = de.deserialize_any(TopLevelVisitor {
        reading,
        text: std::marker::PhantomData,
    })?;
    de.end()?;
    Ok(top)
}

fn no_messages() -> Refusal {
    Refusal::BadTrajectory {
        reason: "a trajectory needs a `messages` array".into(),
    }
}

fn not_a_trajectory() -> Refusal {
    Refusal::BadTrajectory {
        reason: "a trajectory is an object or an array of messages".into(),
    }
}

/// How the messages array is read: typed in place (one pass; any message that does not read
/// fails the whole read), or as texts borrowed from the trajectory, read one by one afterwards.
#[derive(Clone, Copy)]
enum Reading {
    Typed,
    Tolerant,
}

/// The messages of a trajectory as `Reading` left them.
enum Items<'a> {
    Typed(Vec<ChatMessage>),
    Texts(Vec<&'a RawValue>),
}

/// The top of a trajectory's text. `messages` is `None` when the key is missing or not an array.
enum TopLevel<'a> {
    Messages(Items<'a>),
    Trajectory {
        messages: Option<Items<'a>>,
        rest: Map<String, Value>,
    },
    Other,
}

struct TopLevelVisitor<'a> {
    reading: Reading,
    text: std::marker::PhantomData<&'a ()>,
}

fn read_items<'de, A: SeqAccess<'de>>(
    mut seq: A,
    reading: Reading,
) -> Result<Items<'de>, A::Error> {
    let capacity = seq.size_hint().unwrap_or(0);
    Ok(match reading {
        Reading::Typed => {
            let mut messages = Vec::with_capacity(capacity);
            while let Some(message) = seq.next_element::<ChatMessage>()? {
                messages.push(message);
            }
            Items::Typed(messages)
        }
        Reading::Tolerant => {
            let mut texts = Vec::with_capacity(capacity);
            while let Some(text) = seq.next_element::<&'de RawValue>()? {
                texts.push(text);
            }
            Items::Texts(texts)
        }
    })
}

impl<'de: 'a, 'a> Visitor<'de> for TopLevelVisitor<'a> {
    type Value = TopLevel<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trajectory object or an array of messages")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<TopLevel<'a>, A::Error> {
        Ok(TopLevel::Messages(read_items(seq, self.reading)?))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TopLevel<'a>, A::Error> {
        let mut messages = None;
        let mut rest = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "messages" {
                messages = map.next_value_seed(MessagesSeed(self.reading))?;
            } else {
                let value = map.next_value()?;
                rest.insert(key, value);
            }
        }
        Ok(TopLevel::Trajectory { messages, rest })
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<TopLevel<'a>, E> {
        Ok(TopLevel::Other)
    }
}

/// A trajectory's `messages` value: its items when it is an array, `None` for anything else
/// (read past, so the keys after it still count).
struct MessagesSeed(Reading);

impl<'de> de::DeserializeSeed<'de> for MessagesSeed {
    type Value = Option<Items<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Self::Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MessagesSeed {
    type Value = Option<Items<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the messages of a trajectory")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        read_items(seq, self.0).map(Some)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// A message that did not read: why, and its JSON as found.
type Unread = (String, Value);

fn read_value(raw: &Value) -> Result<ChatMessage, Unread> {
    ChatMessage::deserialize(raw).map_err(|e| (e.to_string(), raw.clone()))
}

/// Reads one message from its text; one that does not read is read again as a `Value` so the
/// note says the same as `load`'s (no text positions) and the raw JSON is kept.
fn read_raw(raw: &RawValue) -> Result<ChatMessage, Unread> {
    serde_json::from_str(raw.get()).or_else(|_| {
        let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
        read_value(&value)
    })
}

fn assemble(
    chat_id: &str,
    read: impl Iterator<Item = Result<ChatMessage, Unread>>,
    thread: ThreadParams,
    draft: Option<&Value>,
) -> Loaded {
    let mut notes = Vec::new();
    let read: Vec<Result<ChatMessage, Unread>> = read.collect();
    // An id made up for a message must not be one a later message carries (that message's
    // record would be overwritten by the made-up one's save).
    let given: HashSet<String> = read
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|m| m.message_id.clone())
        .filter(|id| !id.is_empty())
        .collect();
    let mut seen = HashSet::new();
    let mut messages: Vec<ChatMessage> = read
        .into_iter()
        .enumerate()
        .map(|(index, read)| load_message(chat_id, index, read, &given, &mut seen, &mut notes))
        .collect();
    let recovered_draft = recover_draft(draft, &mut messages, &mut notes);
    Loaded {
        thread,
        messages,
        notes,
        recovered_draft,
    }
}

/// A checkpointed draft (`draft` beside the messages) becomes the last message, marked
/// `interrupted`: the reply stopped where the last checkpoint was (SECURITY D21, B3).
fn recover_draft(
    draft: Option<&Value>,
    messages: &mut Vec<ChatMessage>,
    notes: &mut Vec<String>,
) -> Option<String> {
    let raw = draft.filter(|d| d.is_object())?;
    let mut draft = ChatMessage::deserialize(raw).ok()?;
    if draft.message_id.is_empty() || messages.iter().any(|m| m.message_id == draft.message_id) {
        return None;
    }
    draft.tool_calls = None;
    draft.finish_reason = Some("interrupted".into());
    draft.mark_interrupted();
    notes.push(format!(
        "the reply {} was interrupted mid-stream; kept up to its last checkpoint",
        draft.message_id
    ));
    let id = draft.message_id.clone();
    messages.push(draft);
    Some(id)
}

fn thread_from(map: &Map<String, Value>) -> ThreadParams {
    let mut params = map.clone();
    params.remove("messages");
    params.remove("id");
    params.remove("chat_id");
    params.remove("draft");
    let thread: Result<ThreadParams, _> = serde_json::from_value(Value::Object(params.clone()));
    thread.unwrap_or_else(|_| {
        let title = params
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        ThreadParams {
            title,
            ..ThreadParams::default()
        }
    })
}

fn load_message(
    chat_id: &str,
    index: usize,
    read: Result<ChatMessage, Unread>,
    given: &HashSet<String>,
    seen: &mut HashSet<String>,
    notes: &mut Vec<String>,
) -> ChatMessage {
    let mut message = match read {
        Ok(message) => message,
        Err((e, raw)) => {
            notes.push(format!(
                "message {index} could not be read ({e}); kept as a system_notice event"
            ));
            unreadable(raw)
        }
    };
    if message.message_id.is_empty() || seen.contains(&message.message_id) {
        let mut id = format!("{chat_id}-m{index}");
        while seen.contains(&id) || given.contains(&id) {
            id.push('_');
        }
        if !message.message_id.is_empty() {
            notes.push(format!(
                "message {index} repeated id {}; renamed {id}",
                message.message_id
            ));
        }
        message.message_id = id;
    }
    seen.insert(message.message_id.clone());
    message
}

fn unreadable(raw: Value) -> ChatMessage {
    let mut message = ChatMessage::new(String::new(), Role::Event, Content::Text(raw.to_string()));
    message.set_event("system_notice", "load", json!({"raw": raw}));
    message
}
