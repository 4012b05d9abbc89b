//! Regular expression subscriptions: compiled once and kept, resolved against the topic
//! names when a group first sees a regex or the topics change, not at every heartbeat.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use regex_automata::meta::Regex;

use super::TopicImage;

/// Distinct regexes kept compiled; past this the cache starts afresh (a client sending
/// ever new patterns cannot grow it without bound).
const CACHED_REGEXES_MAX: usize = 1024;

#[derive(Default)]
pub struct RegexCache {
    compiled: HashMap<String, Arc<Regex>>,
}

impl RegexCache {
    /// `pattern` compiled to match whole topic names, as Kafka's RE2J `matches` does.
    pub fn compile(&mut self, pattern: &str) -> Result<Arc<Regex>, ResponseError> {
        if let Some(re) = self.compiled.get(pattern) {
            return Ok(re.clone());
        }
        let re = Regex::new(&format!("^(?:{pattern})$"))
            .map(Arc::new)
            .map_err(|_| ResponseError::InvalidRegularExpression)?;
        if self.compiled.len() >= CACHED_REGEXES_MAX {
            self.compiled.clear();
        }
        self.compiled.insert(pattern.to_string(), re.clone());
        Ok(re)
    }

    /// The topics `pattern` matches, sorted. Kafka matches every topic, internal ones
    /// included.
    pub fn resolve(
        &mut self,
        pattern: &str,
        topics: &TopicImage,
    ) -> Result<Vec<String>, ResponseError> {
        let re = self.compile(pattern)?;
        Ok(topics
            .names()
            .filter(|t| re.is_match(*t))
            .map(str::to_string)
            .collect())
    }

    pub fn len(&self) -> usize {
        self.compiled.len()
    }

    pub fn is_empty(&self) -> bool {
        self.compiled.is_empty()
    }
}
