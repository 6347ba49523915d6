//! Secrets out of everything a call hands on: output text and every string inside a JSON value.
//!
//! Each secret is replaced by `[REDACTED:<rule>]` and counted per rule. The rules are the built-in
//! secret shapes (`BUILTINS`), opt-in `email` and `phone`, user regexes, literal strings and the
//! values of named environment variables. Env values shorter than 6 characters are skipped: a value
//! that short is too likely to turn up in ordinary text.
//!
//! Linear time: every rule, user patterns included, runs on the `regex` crate (finite automata, no
//! backtracking), so a pattern such as `(a+)+$` costs no more per byte than any other. All rules go
//! into one alternation scanned once; its capture groups tell which rule fired and which part is the
//! secret. Speed comes from the literal prefilter: every built-in rule starts with a literal (`ghp_`,
//! `Bearer`, `password`, ...), so the lazy DFA only runs near candidates. Hence key words are spelled
//! lower, Capitalized and UPPER rather than matched case-insensitively (too many literals), and the
//! email rule, whose start is open, scans in a pass of its own. The phone rule, or a user pattern with
//! an open start (`\w+@...`), costs the prefilter: 2 to 3 ms per MiB instead of 1. Built-in rules use
//! ASCII word boundaries `(?-u:\b)` and ASCII classes: a Unicode `\b` makes the lazy DFA give up on
//! non-ASCII text.
//!
//! Precision: a redactor that eats ordinary data is useless. Prefixed tokens (`ghp_`, `AKIA`, ...)
//! rely on their exact shape and are dropped when they look like placeholders (`xxxxxx`, `EXAMPLE`,
//! `your`, ...); their prefix is enough to start one, so a token glued to the word before it (`run_ghp_…`,
//! `keyAKIA…`) is found too, but for prefixes that also end ordinary words (`sk-`, `rk_`, `xox`, `gl…`), which
//! must not follow a letter or a digit (`desk-admin-…`, `network_test_…`). The generic rules (`secret-assignment`, `bearer-token`, `aws-secret-access-key`)
//! also reject references (`process.env.X`), plain words, numbers and values of low Shannon entropy.
//! A rejected candidate never hides a later secret: the search resumes inside it.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use regex::{CaptureLocations, Regex, RegexBuilder};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::result::Redactions;

mod precision;
use precision::{is_email, is_path, is_phone, is_placeholder, is_prose, is_real_pem, is_reference, plausible};

/// Executor option `redact` as it arrives in JSON; every field optional.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RedactOptions {
    /// The built-in secret rules, and secret-named JSON fields.
    pub builtin: bool,
    /// Extra user regexes.
    pub patterns: Vec<UserPattern>,
    /// Exact strings to redact wherever they appear; rule `literal`.
    pub literals: Vec<String>,
    /// Environment variables whose values are redacted wherever they appear; rule `env:NAME`.
    pub env: Vec<String>,
    /// Rule `email`.
    pub emails: bool,
    /// Rule `phone`.
    pub phones: bool,
}

impl Default for RedactOptions {
    fn default() -> Self {
        RedactOptions { builtin: true, patterns: Vec::new(), literals: Vec::new(), env: Vec::new(), emails: false, phones: false }
    }
}

/// A user regex: `{ "name"?: "...", "pattern": "..." }` or a bare pattern string. The whole match is
/// redacted.
#[derive(Debug, Clone)]
pub struct UserPattern {
    /// Rule name; `custom` when absent.
    pub name: Option<String>,
    pub pattern: String,
}

impl<'de> Deserialize<'de> for UserPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            #[serde(default)]
            name: Option<String>,
            pattern: String,
        }
        struct PatternVisitor;
        impl<'de> Visitor<'de> for PatternVisitor {
            type Value = UserPattern;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a regex string or { name?, pattern }")
            }
            fn visit_str<E: de::Error>(self, pattern: &str) -> Result<UserPattern, E> {
                Ok(UserPattern { name: None, pattern: pattern.to_owned() })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<UserPattern, A::Error> {
                let full = Full::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(UserPattern { name: full.name, pattern: full.pattern })
            }
        }
        deserializer.deserialize_any(PatternVisitor)
    }
}

/// How a candidate found by a rule's regex is judged before it counts as a secret.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Check {
    /// User patterns, literals, env values: the user said so.
    Trust,
    /// A prefixed token: its exact shape, unless a placeholder. Its prefix is enough to start one, glued to a word
    /// before it or not (`run_ghp_…`).
    Token,
    /// A token whose prefix also ends ordinary words (`sk-` in `desk-`, `rk_` in `network_`): as `Token`, but not
    /// right after a letter or a digit (after `_` or `-` it is glued all the same: `key_sk-proj-…`).
    WordToken,
    /// A PEM block with a real body.
    Pem,
    /// The value after a secret-named key: plausible with at least this many bits of entropy per char.
    Assignment(f64),
    /// A value with no key to go by: plausible with at least this many bits of entropy per char.
    Generic(f64),
    /// The password of a URL: anything but a placeholder or a reference.
    UrlPassword,
    Email,
    Phone,
}

impl Check {
    /// Generic rules give way to a more telling rule matching their value (`token=ghp_...`).
    fn is_generic(self) -> bool {
        matches!(self, Check::Assignment(_) | Check::Generic(_) | Check::UrlPassword)
    }
}

/// A built-in rule. The secret is its first capture group that took part in the match, else the
/// whole match; the order matters when two rules match at the same place (the first one wins).
struct Builtin {
    name: &'static str,
    check: Check,
    pattern: &'static str,
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "private-key",
        check: Check::Pem,
        // The body: base64, line breaks (raw or JSON-escaped) with indentation after them, and header
        // lines (`Proc-Type: 4,ENCRYPTED`). Nothing else, so an unclosed BEGIN dies at the first prose.
        pattern: concat!(
            r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
            r"(?:[A-Za-z0-9+/=]|(?:\r|\\r)?(?:\n|\\n)[ \t]*|[A-Z][A-Za-z-]*:[ \t][ -\[\]-~]*)*?",
            r"-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
        ),
    },
    Builtin {
        name: "aws-secret-access-key",
        check: Check::Generic(3.5),
        pattern: concat!(
            r"(?:aws_secret_access_key|AWS_SECRET_ACCESS_KEY|aws_secret_key|AWS_SECRET_KEY|secret_access_key|SECRET_ACCESS_KEY|SecretAccessKey|secretAccessKey)",
            r#"\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*\\?["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        ),
    },
    Builtin { name: "anthropic-api-key", check: Check::Token, pattern: r"sk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{32,}" },
    Builtin {
        name: "openai-api-key",
        check: Check::WordToken,
        pattern: r"sk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{48}(?-u:\b)|[A-Za-z0-9_-]{8,}T3BlbkFJ[A-Za-z0-9_-]{8,})",
    },
    Builtin {
        name: "github-token",
        check: Check::Token,
        pattern: r"(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{82})(?-u:\b)",
    },
    Builtin {
        name: "gitlab-token",
        check: Check::WordToken,
        pattern: r"(?:glpat|glptt|gldt|glrt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*",
    },
    Builtin {
        name: "slack-webhook",
        check: Check::Token,
        pattern: r"https://hooks\.slack\.com/services/(T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,})",
    },
    Builtin { name: "slack-token", check: Check::WordToken, pattern: r"(?:xoxe\.)?xox[abeprs]-[A-Za-z0-9-]{10,}" },
    Builtin { name: "stripe-key", check: Check::WordToken, pattern: r"[rs]k_(?:live|test)_[A-Za-z0-9]{24,}(?-u:\b)" },
    Builtin {
        name: "google-api-key",
        check: Check::Token,
        // The key may end in `-`, where `\b` cannot tell the end: the next char is matched instead.
        pattern: r"(AIza[A-Za-z0-9_-]{35})(?:[^A-Za-z0-9_-]|$)",
    },
    Builtin { name: "aws-access-key-id", check: Check::Token, pattern: r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?-u:\b)" },
    Builtin { name: "jwt", check: Check::Token, pattern: r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" },
    Builtin {
        name: "bearer-token",
        check: Check::Generic(3.0),
        pattern: r"(?-u:\b)(?:Bearer|bearer|BEARER)[ \t]+([A-Za-z0-9._~+/-]{16,}=*)",
    },
    Builtin {
        name: "basic-auth-url",
        check: Check::UrlPassword,
        // Starts at `://` rather than at the scheme; the password may hold `@` (the last one ends it).
        pattern: r#"://[^\s:/?#@"'<>]*:([^\s/?#"'<>]+)@"#,
    },
    Builtin {
        name: "secret-assignment",
        check: Check::Assignment(2.5),
        // The end of a key, found anywhere in an identifier (`DB_PASSWORD`, `clientSecret`, `x-api-key`);
        // the whole identifier is judged afterwards. No bare `key`: S3 listings and caches are full of it.
        // Lower, Capitalized and UPPER spellings only: a case-insensitive set is too large for the literal
        // prefilter and triples the scan time. Values: "...", '...', \"...\" (JSON inside a string), bare.
        pattern: concat!(
            r"(?:password|Password|PASSWORD|passwd|Passwd|PASSWD|passphrase|Passphrase|PASSPHRASE|pwd|Pwd|PWD",
            r"|secret|Secret|SECRET|(?:api|Api|API|secret|Secret|SECRET|private|Private|PRIVATE)[_.-]?(?:key|Key|KEY)",
            r"|token|Token|TOKEN|authorization|Authorization|AUTHORIZATION",
            r"|credentials?|Credentials?|CREDENTIALS?)",
            r#"\\?["']?[ \t]*(?::=|=>|[:=])[ \t]*(?:(?:Basic|basic|Token|token)[ \t]+)?"#,
            r#"(?:"([^"\r\n]*)"|'([^'\r\n]*)'|\\"([^"\\\r\n]*)\\"|([^\s"'`,;&|()\[\]{}<>\\]+))"#,
        ),
    },
];

const EMAIL: Builtin = Builtin {
    name: "email",
    check: Check::Email,
    pattern: r"(?-u:\b)[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,24}(?-u:\b)",
};

const PHONE: Builtin = Builtin {
    name: "phone",
    check: Check::Phone,
    // International (`+44 20 7946 0958`) or North American (`(415) 555-2671`, `415.555.2671`); what
    // surrounds the number is checked afterwards, as is the count of digits.
    pattern: concat!(
        r"\+[1-9][0-9]{0,3}(?:[ .-]?(?:\([0-9]{1,4}\)|[0-9]{1,5})){1,5}",
        r"|(?:\([2-9][0-9]{2}\) ?|(?-u:\b)(?:1[ .-])?[2-9][0-9]{2}[.-])[2-9][0-9]{2}[.-][0-9]{4}(?-u:\b)",
    ),
};

const SECRET_FIELD: &str = "secret-field";
/// Env values shorter than this are ignored (see the module doc).
const MIN_ENV_LEN: usize = 6;
/// Prefix of the group wrapping each rule in the combined regex.
const GROUP: &str = "tg__";
const SIZE_LIMIT: usize = 64 << 20;
const DFA_SIZE_LIMIT: usize = 32 << 20;

#[derive(Clone)]
enum Name {
    Fixed(Cow<'static, str>),
    /// Literals and env values share one alternation; the matched text tells whose it was.
    ByValue(Arc<HashMap<String, String>>),
}

impl Name {
    fn of(&self, matched: &str) -> &str {
        match self {
            Name::Fixed(name) => name,
            Name::ByValue(names) => names.get(matched).map_or("literal", String::as_str),
        }
    }
}

/// A rule before it is compiled.
#[derive(Clone)]
struct Spec {
    name: Name,
    pattern: Cow<'static, str>,
    check: Check,
    /// Whether the rule's own groups mark the secret (built-ins) or are the user's business.
    inner: bool,
}

impl Spec {
    fn builtin(rule: &Builtin) -> Spec {
        Spec { name: Name::Fixed(Cow::Borrowed(rule.name)), pattern: Cow::Borrowed(rule.pattern), check: rule.check, inner: true }
    }
}

struct Rule {
    name: Name,
    check: Check,
    /// The group wrapping the rule in the combined regex.
    group: usize,
    /// Groups `group + 1 .. end` may hold the secret.
    end: usize,
}

/// One combined regex and the rules it alternates.
struct Matcher {
    regex: Regex,
    rules: Vec<Rule>,
}

impl Matcher {
    fn build(specs: Vec<Spec>) -> Result<Matcher, regex::Error> {
        let pattern = specs.iter().enumerate().map(|(i, s)| format!("(?P<{GROUP}{i}>{})", s.pattern)).collect::<Vec<_>>().join("|");
        let regex = RegexBuilder::new(&pattern).size_limit(SIZE_LIMIT).dfa_size_limit(DFA_SIZE_LIMIT).build()?;
        let groups: Vec<usize> = {
            let index: HashMap<&str, usize> = regex.capture_names().enumerate().filter_map(|(g, n)| Some((n?, g))).collect();
            (0..specs.len()).map(|i| index[format!("{GROUP}{i}").as_str()]).collect()
        };
        let rules = specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| Rule {
                end: if spec.inner { groups.get(i + 1).copied().unwrap_or(regex.captures_len()) } else { groups[i] + 1 },
                group: groups[i],
                name: spec.name,
                check: spec.check,
            })
            .collect();
        Ok(Matcher { regex, rules })
    }

    fn redact<'a>(&self, text: &'a str, counts: &mut Redactions) -> Cow<'a, str> {
        let mut locs = self.regex.capture_locations();
        let mut out = String::new();
        // text[..done] is settled in `out`; the search goes on from `pos`.
        let (mut done, mut pos) = (0, 0);
        while pos <= text.len() {
            let Some(m) = self.regex.captures_read_at(&mut locs, text, pos) else { break };
            let (rule, secret) = self.identify(&locs);
            if self.accepts(rule, text, m.start(), secret.clone(), &mut locs, true) {
                let name = rule.name.of(&text[secret.clone()]);
                if done == 0 {
                    out.reserve(text.len());
                }
                out.push_str(&text[done..secret.start]);
                out.push_str("[REDACTED:");
                out.push_str(name);
                out.push(']');
                count(counts, name);
                (done, pos) = (secret.end, secret.end);
            } else if secret.start > m.start() {
                // Rejected, but the value may hold a secret of another shape (`key=AIza...`, `token: ghp_...`).
                pos = secret.start;
            } else {
                pos = m.end().max(next_char(text, m.start()));
            }
        }
        if done == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[done..]);
        Cow::Owned(out)
    }

    /// The rule behind the match in `locs`, and the span to replace.
    fn identify(&self, locs: &CaptureLocations) -> (&Rule, Range<usize>) {
        let rule = self.rules.iter().find(|r| locs.get(r.group).is_some()).expect("a match comes from a rule");
        let (start, end) =
            (rule.group + 1..rule.end).find_map(|g| locs.get(g)).or_else(|| locs.get(rule.group)).expect("the rule's group matched");
        (rule, start..end)
    }

    /// Whether the candidate `secret` of a match starting at `start` is a secret.
    fn accepts(&self, rule: &Rule, text: &str, start: usize, secret: Range<usize>, locs: &mut CaptureLocations, defer: bool) -> bool {
        let value = &text[secret.clone()];
        let ok = !value.is_empty()
            && match rule.check {
                Check::Trust => true,
                Check::Token => !is_placeholder(value),
                Check::WordToken => !is_placeholder(value) && !text[..start].chars().next_back().is_some_and(|c| c.is_ascii_alphanumeric()),
                Check::Pem => is_real_pem(value),
                Check::Assignment(bits) => {
                    is_secret_key(key_around(text, start)) && plausible(value, bits) && !is_path(value) && !is_prose(value)
                }
                Check::Generic(bits) => plausible(value, bits),
                Check::UrlPassword => !is_placeholder(value) && !is_reference(value),
                Check::Email => is_email(value),
                Check::Phone => is_phone(text, secret.clone()),
            };
        ok && !(defer && rule.check.is_generic() && self.claimed_by_other(rule, text, secret, locs))
    }

    /// Whether another rule matches right at a generic rule's value (`Bearer` in `"Authorization": "Bearer ..."`,
    /// `ghp_` after `token=`): its name says more, and rejecting here lets the search find it.
    fn claimed_by_other(&self, rule: &Rule, text: &str, value: Range<usize>, locs: &mut CaptureLocations) -> bool {
        let hay = &text[..value.end];
        match self.regex.captures_read_at(locs, hay, value.start) {
            Some(m) if m.start() == value.start => {
                let (other, secret) = self.identify(locs);
                !std::ptr::eq(other, rule) && self.accepts(other, hay, m.start(), secret, locs, false)
            }
            _ => false,
        }
    }
}

/// Redacts secrets in text and JSON values. Cheap to share (`Send + Sync`) and to clone.
#[derive(Clone)]
pub struct Redactor {
    /// Normally one; more when a user pattern would not combine with the rest.
    matchers: Vec<Arc<Matcher>>,
    /// Secret-named JSON fields, part of the built-in rules.
    fields: bool,
    /// The names its rules redact under: only `[REDACTED:<one of these>]` is a redaction already.
    names: Arc<HashSet<String>>,
}

impl Redactor {
    /// Compiles every rule once. Err for a user pattern that does not compile or can match the empty
    /// string, an empty literal, or a rule name with characters other than `[A-Za-z0-9_:.-]`.
    pub fn new(options: &RedactOptions) -> Result<Redactor, String> {
        let mut extra = Vec::new();
        let mut values: HashMap<String, String> = HashMap::new();
        for (i, literal) in options.literals.iter().enumerate() {
            if literal.is_empty() {
                return Err(format!("literals[{i}] is empty: an empty literal would match everywhere"));
            }
            values.entry(literal.clone()).or_insert_with(|| "literal".to_owned());
        }
        for var in &options.env {
            let name = format!("env:{var}");
            check_name(&name).map_err(|why| format!("env {var:?}: {why}"))?;
            match std::env::var(var) {
                Ok(value) if value.chars().count() >= MIN_ENV_LEN => {
                    values.entry(value).or_insert(name);
                }
                _ => {}
            }
        }
        if !values.is_empty() {
            let mut sorted: Vec<&str> = values.keys().map(String::as_str).collect();
            // Longest first: at one position the alternation takes the first that matches.
            sorted.sort_by_key(|v| std::cmp::Reverse(v.len()));
            let pattern = sorted.into_iter().map(regex::escape).collect::<Vec<_>>().join("|");
            extra.push(Spec { name: Name::ByValue(Arc::new(values)), pattern: pattern.into(), check: Check::Trust, inner: false });
        }
        for (i, user) in options.patterns.iter().enumerate() {
            let name = user.name.as_deref().unwrap_or("custom");
            let at = format!("patterns[{i}] {:?}", user.pattern);
            check_name(name).map_err(|why| format!("{at}: {why}"))?;
            check_user_pattern(&user.pattern).map_err(|why| format!("{at}: {why}"))?;
            extra.push(Spec {
                name: Name::Fixed(name.to_owned().into()),
                pattern: user.pattern.clone().into(),
                check: Check::Trust,
                inner: false,
            });
        }

        let base = builtin_specs(options.builtin, options.phones);
        let mut matchers = if !extra.is_empty() {
            build_matchers(base, extra)?
        } else if !base.is_empty() {
            vec![shared(options.builtin, options.phones)]
        } else {
            Vec::new()
        };
        if options.emails {
            matchers.push(email_matcher());
        }
        let mut names: HashSet<String> = [SECRET_FIELD.to_string()].into();
        for rule in matchers.iter().flat_map(|m| &m.rules) {
            match &rule.name {
                Name::Fixed(name) => {
                    names.insert(name.to_string());
                }
                Name::ByValue(values) => {
                    names.insert("literal".into());
                    names.extend(values.values().cloned());
                }
            }
        }
        Ok(Redactor { matchers, fields: options.builtin, names: Arc::new(names) })
    }

    /// Replaces each secret in `text` by `[REDACTED:<rule-name>]` and adds to `counts`. Borrowed when
    /// nothing matched.
    pub fn redact<'a>(&self, text: &'a str, counts: &mut Redactions) -> Cow<'a, str> {
        let mut text = Cow::Borrowed(text);
        for matcher in &self.matchers {
            let redacted = match matcher.redact(&text, counts) {
                Cow::Owned(s) => s,
                Cow::Borrowed(_) => continue,
            };
            text = Cow::Owned(redacted);
        }
        text
    }

    /// Redacts every string inside `value` in place, at any depth, object keys included (a key holding a secret
    /// is renamed). A string or number under a secret-named key (`password`, `apiKey`, `client_secret`, ...) is
    /// replaced whole by `[REDACTED:secret-field]` unless it is a placeholder or nothing but redactions already.
    pub fn redact_value(&self, value: &mut Value, counts: &mut Redactions) {
        if self.is_empty() {
            return;
        }
        // A stack, not recursion: a value built in code may nest deeper than the call stack allows.
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(s) => self.redact_string(s, counts),
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    // Whether a key names a secret is read off the key as it came, before it is redacted itself.
                    let renamed = self.redact_keys(map, counts);
                    for (i, (key, child)) in map.iter_mut().enumerate() {
                        let secret_key = renamed.as_ref().map_or_else(|| is_secret_key(key), |secret| secret[i]);
                        // Judged on the value as it came: redacting a part first would hide the rest of it.
                        if self.fields && secret_key && self.holds_secret(child) {
                            self.redact_secret_field(child, counts);
                        } else if let Value::String(s) = child {
                            self.redact_string(s, counts);
                        } else if child.is_array() || child.is_object() {
                            stack.push(child);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// A secret-named field's value goes whole (`[REDACTED:secret-field]`), unless it is nothing but secrets the
    /// rules name (`token: ghp_…` reads `[REDACTED:github-token]`).
    fn redact_secret_field(&self, value: &mut Value, counts: &mut Redactions) {
        if let Value::String(s) = value {
            let mut found = Redactions::new();
            if let Cow::Owned(clean) = self.redact(s, &mut found) {
                if self.without_redactions(&clean).trim().is_empty() {
                    *s = clean;
                    for (rule, n) in found {
                        *counts.entry(rule).or_default() += n;
                    }
                    return;
                }
            }
        }
        *value = Value::String(format!("[REDACTED:{SECRET_FIELD}]"));
        count(counts, SECRET_FIELD);
    }

    /// Keys holding a secret, renamed to their redacted text; order kept, and two that redact alike told apart.
    /// When any was renamed: whether each key, as it came, names a secret.
    fn redact_keys(&self, map: &mut Map<String, Value>, counts: &mut Redactions) -> Option<Vec<bool>> {
        let mut renamed = Vec::new();
        for (i, key) in map.keys().enumerate() {
            if let Cow::Owned(clean) = self.redact(key, counts) {
                renamed.push((i, clean));
            }
        }
        if renamed.is_empty() {
            return None;
        }
        let secret = map.keys().map(|k| is_secret_key(k)).collect();
        let entries = std::mem::take(map);
        let mut renamed = renamed.into_iter().peekable();
        let mut next_free: HashMap<String, usize> = HashMap::new();
        for (i, (key, value)) in entries.into_iter().enumerate() {
            let mut key = match renamed.next_if(|(at, _)| *at == i) {
                Some((_, clean)) => clean,
                None => key,
            };
            if map.contains_key(&key) {
                // The next free number for this name, counted on from the last one given: linear in the keys.
                let n = next_free.entry(key.clone()).or_insert(1);
                let base = std::mem::take(&mut key);
                loop {
                    *n += 1;
                    key = format!("{base} ({n})");
                    if !map.contains_key(&key) {
                        break;
                    }
                }
            }
            map.insert(key, value);
        }
        Some(secret)
    }

    /// True when there are no rules at all: callers skip the work.
    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty() && !self.fields
    }

    fn redact_string(&self, s: &mut String, counts: &mut Redactions) {
        if let Cow::Owned(redacted) = self.redact(s, counts) {
            *s = redacted;
        }
    }
}

fn builtin_specs(builtin: bool, phones: bool) -> Vec<Spec> {
    let builtins = if builtin { BUILTINS } else { &[] };
    builtins.iter().chain(phones.then_some(&PHONE)).map(Spec::builtin).collect()
}

/// Built-in rules alone are the same for every executor: compiled once per process.
fn shared(builtin: bool, phones: bool) -> Arc<Matcher> {
    static SHARED: [OnceLock<Arc<Matcher>>; 4] = [const { OnceLock::new() }; 4];
    SHARED[usize::from(builtin) | (usize::from(phones) << 1)]
        .get_or_init(|| Arc::new(Matcher::build(builtin_specs(builtin, phones)).expect("the built-in rules compile")))
        .clone()
}

/// The email rule runs as a pass of its own: alone it is a quick scan for `@`, while in the
/// alternation its open start would cost every rule the literal prefilter (10 MiB: 7 ms apart,
/// 33 ms combined).
fn email_matcher() -> Arc<Matcher> {
    static EMAILS: OnceLock<Arc<Matcher>> = OnceLock::new();
    EMAILS.get_or_init(|| Arc::new(Matcher::build(vec![Spec::builtin(&EMAIL)]).expect("the email rule compiles"))).clone()
}

/// One matcher for everything, unless some user rule will not combine with the others (a group name
/// used twice, a size limit): such a rule gets a matcher of its own.
fn build_matchers(base: Vec<Spec>, extra: Vec<Spec>) -> Result<Vec<Arc<Matcher>>, String> {
    let all: Vec<Spec> = base.iter().chain(&extra).cloned().collect();
    if let Ok(matcher) = Matcher::build(all) {
        return Ok(vec![Arc::new(matcher)]);
    }
    let (mut combined, mut alone) = (base, Vec::new());
    for spec in extra {
        combined.push(spec);
        if Matcher::build(combined.clone()).is_err() {
            let spec = combined.pop().expect("just pushed");
            let pattern = spec.pattern.clone();
            alone.push(Arc::new(Matcher::build(vec![spec]).map_err(|e| format!("pattern {pattern:?}: {e}"))?));
        }
    }
    let mut matchers = Vec::new();
    if !combined.is_empty() {
        matchers.push(Arc::new(Matcher::build(combined).map_err(|e| format!("rules: {e}"))?));
    }
    matchers.extend(alone);
    Ok(matchers)
}

fn check_name(name: &str) -> Result<(), String> {
    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_:.-".contains(&b)) {
        Ok(())
    } else {
        Err(format!("rule name {name:?} must be non-empty and use only A-Z a-z 0-9 _ : . -"))
    }
}

fn check_user_pattern(pattern: &str) -> Result<(), String> {
    let regex = RegexBuilder::new(pattern).size_limit(SIZE_LIMIT).build().map_err(|e| format!("invalid regex: {e}"))?;
    // A pattern that matches nothing at all (`a*`, `\b`) would redact nothing and stall on every position.
    if ["", " ", "a", "a a", "\n", "0"].iter().any(|probe| regex.find_iter(probe).any(|m| m.is_empty())) {
        return Err("the pattern can match the empty string; make it require at least one character".to_owned());
    }
    Ok(())
}

fn count(counts: &mut Redactions, name: &str) {
    match counts.get_mut(name) {
        Some(n) => *n += 1,
        None => {
            counts.insert(name.to_owned(), 1);
        }
    }
}

fn next_char(text: &str, at: usize) -> usize {
    at + text[at..].chars().next().map_or(1, char::len_utf8)
}

/// Keys (lowercased, separators dropped) that name a secret: a key names one when it ends with any of these.
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "secretkey",
    "secretaccesskey",
    "apikey",
    "token",
    "privatekey",
    "authorization",
    "credential",
    "credentials",
];
/// Token-named keys that hold no secret: pagination cursors, limits.
const NOT_SECRET_KEYS: &[&str] = &["pagetoken", "nexttoken", "continuationtoken", "cursortoken", "synctoken", "maxtoken"];

fn is_secret_key(key: &str) -> bool {
    let key: String = key.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect();
    SECRET_KEYS.iter().any(|k| key.ends_with(k)) && !NOT_SECRET_KEYS.iter().any(|k| key.ends_with(k))
}

/// The identifier around `at` (`DB_PASSWORD` around `PASSWORD`), looking at most 256 bytes back.
fn key_around(text: &str, at: usize) -> &str {
    let ident = |b: &u8| b.is_ascii_alphanumeric() || b"_.-".contains(b);
    let bytes = text.as_bytes();
    let floor = at.saturating_sub(256);
    // Every stop is next to an ASCII byte (or at `floor` inside an ASCII run), so on a char boundary.
    let start = bytes[floor..at].iter().rposition(|b| !ident(b)).map_or(floor, |i| floor + i + 1);
    let end = bytes[at..].iter().position(|b| !ident(b)).map_or(text.len(), |i| at + i);
    &text[start..end]
}

impl Redactor {
    fn holds_secret(&self, value: &Value) -> bool {
        match value {
            Value::String(s) => {
                // Judged on what is not a redaction already: `[REDACTED:x] hunter2` still holds `hunter2`, and a
                // marker no rule of this redactor leaves is text imitating one.
                let rest = self.without_redactions(s);
                rest.contains("[REDACTED:") || (!rest.trim().is_empty() && !is_placeholder(&rest) && !is_path(&rest))
            }
            Value::Number(n) => !is_placeholder(&n.to_string()),
            _ => false,
        }
    }

    /// `s` without the markers its rules leave (`[REDACTED:rule]`, for rules it has). Linear: a marker's name is
    /// read only as far as name characters go.
    fn without_redactions<'a>(&self, s: &'a str) -> Cow<'a, str> {
        const MARKER: &str = "[REDACTED:";
        if !s.contains(MARKER) {
            return Cow::Borrowed(s);
        }
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        while let Some(at) = rest.find(MARKER) {
            out.push_str(&rest[..at]);
            let after = &rest[at + MARKER.len()..];
            let name_len = after.bytes().take_while(|b| b.is_ascii_alphanumeric() || b"_:.-".contains(b)).count();
            if after[name_len..].starts_with(']') && self.names.contains(&after[..name_len]) {
                rest = &after[name_len + 1..];
            } else {
                out.push_str(MARKER);
                rest = after;
            }
        }
        out.push_str(rest);
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A deterministic generator of ordinary text (logs, JSON, prose with CJK and emoji, hashes, base64).
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
        fn chars(&mut self, alphabet: &[u8], n: usize) -> String {
            (0..n).map(|_| char::from(alphabet[(self.next() % alphabet.len() as u64) as usize])).collect()
        }
        fn hex(&mut self, n: usize) -> String {
            self.chars(b"0123456789abcdef", n)
        }
        fn b64(&mut self, n: usize) -> String {
            self.chars(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", n)
        }
        fn uuid(&mut self) -> String {
            format!("{}-{}-{}-{}-{}", self.hex(8), self.hex(4), self.hex(4), self.hex(4), self.hex(12))
        }
        fn line(&mut self) -> String {
            match self.next() % 10 {
                0..=3 => format!(
                    "2024-05-01T12:{:02}:{:02}.{:03}Z INFO [worker-{}] request id={} method={} path=/api/v1/items/{} status=200 duration_ms={}.{} user={}\n",
                    self.next() % 60, self.next() % 60, self.next() % 1000, self.next() % 8, self.uuid(), self.pick(&["GET", "POST", "PUT"]),
                    self.next() % 100_000, self.next() % 500, self.next() % 10, self.pick(&["alice", "bob", "carol"])
                ),
                4 | 5 => format!(
                    "{{\"id\": {}, \"sha\": \"{}\", \"name\": \"{}\", \"tags\": [\"a\", \"b\"], \"created_at\": \"2024-05-01T12:00:00Z\", \"checksum\": \"sha256:{}\", \"input_tokens\": {}}}\n",
                    self.next() % 10_000_000_000, self.hex(40), self.pick(&["widget", "gadget", "配置文件"]), self.hex(64), self.next() % 5000
                ),
                6 => format!("{}\n", self.pick(&[
                    "这是一个测试日志行，包含中文和表情 🙂 以及一些英文单词。The password policy requires twelve characters.",
                    "Résumé café naïve — ünïcödé text; enter your password to continue; the bearer of news arrived.",
                    "Build finished in 12.5s (version 1.2.3, commit abc1234) — 成功 ✅ tokens used: 1234",
                ])),
                7 => match self.next() % 3 {
                    0 => format!("commit {}\nAuthor: Dev <dev@corp.test>\nDate:   Wed May 1 12:00:00 2024 +0000\n", self.hex(40)),
                    1 => format!(
                        "{{\"Key\": \"photos/2024/05/img_{}.jpg\", \"ETag\": \"\\\"{}\\\"\", \"Size\": {}, \"token_count\": 12, \"key\": \"{}\"}}\n",
                        self.next() % 10_000, self.hex(32), self.next() % 100_000, self.uuid()
                    ),
                    _ => format!("cache hit key=user:{}:profile ttl=300 token=null auth=ok password: required url=https://cdn.test/a/b\n", self.next() % 10_000),
                },
                8 => format!("  \"integrity\": \"sha512-{}==\",\n", self.b64(86)),
                _ => {
                    let n = 200 + (self.next() % 400) as usize;
                    format!("<img src=\"data:image/png;base64,iVBORw0KGgo{}\"/>\n", self.b64(n))
                }
            }
        }
    }

    pub(super) fn ordinary_text(bytes: usize, seed: u64) -> String {
        let mut gen = Gen(seed);
        let mut text = String::with_capacity(bytes + 1024);
        while text.len() < bytes {
            text.push_str(&gen.line());
        }
        text
    }

    const GHP: &str = "ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d";
    const JWT: &str =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1Xzg4NDEiLCJleHAiOjE3MzU2ODk2MDB9.575yx8xm5MslfY5ubiheyEd7P4zDL_ak6J0kGODKdin";

    /// (rule, input, expected output): one realistic sample per built-in rule and setting.
    fn secret_samples() -> Vec<(&'static str, &'static str, &'static str)> {
        vec![
            (
                "aws-access-key-id",
                "2024-05-01T12:00:00Z ERROR s3 upload failed for key AKIAEJVQTIA4D5RGN5S7 (AccessDenied)",
                "2024-05-01T12:00:00Z ERROR s3 upload failed for key [REDACTED:aws-access-key-id] (AccessDenied)",
            ),
            (
                "aws-secret-access-key",
                "[default]\naws_secret_access_key = K777pzNk8cL6j5IXAAjlsHUqJoUD+/Ydua/5ZMs1\nregion = eu-west-1",
                "[default]\naws_secret_access_key = [REDACTED:aws-secret-access-key]\nregion = eu-west-1",
            ),
            (
                "aws-secret-access-key",
                r#"{"Credentials": {"AccessKeyId": "ASIAEJVQTIA4D5RGN5S7", "SecretAccessKey": "K777pzNk8cL6j5IXAAjlsHUqJoUD+/Ydua/5ZMs1"}}"#,
                r#"{"Credentials": {"AccessKeyId": "[REDACTED:aws-access-key-id]", "SecretAccessKey": "[REDACTED:aws-secret-access-key]"}}"#,
            ),
            ("github-token", "export GITHUB_TOKEN=ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d\n", "export GITHUB_TOKEN=[REDACTED:github-token]\n"),
            // Glued to the word before it: the prefix starts the token.
            ("github-token", "run_ghp_u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8d done", "run_[REDACTED:github-token] done"),
            ("aws-access-key-id", "keyAKIAEJVQTIA4D5RGN5S7 rest", "key[REDACTED:aws-access-key-id] rest"),
            ("openai-api-key", "key_sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0hIj3kLm6n", "key_[REDACTED:openai-api-key]"),
            (
                "github-token",
                r#"curl -H "Authorization: token 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" https://api.github.com/user"#,
                r#"curl -H "Authorization: token [REDACTED:github-token]" https://api.github.com/user"#,
            ),
            (
                "gitlab-token",
                "Using PRIVATE-TOKEN glpat-ORS-6ilI8ihN5KXSc7Tv for gitlab.com",
                "Using PRIVATE-TOKEN [REDACTED:gitlab-token] for gitlab.com",
            ),
            (
                "openai-api-key",
                r#"{"openai": {"api_key": "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"}}"#,
                r#"{"openai": {"api_key": "[REDACTED:openai-api-key]"}}"#,
            ),
            (
                "openai-api-key",
                "OPENAI_API_KEY=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 python app.py",
                "OPENAI_API_KEY=[REDACTED:openai-api-key] python app.py",
            ),
            (
                "anthropic-api-key",
                r#"curl https://api.anthropic.com/v1/messages -H "x-api-key: sk-ant-api03-qhT61qtc4xatws8phP9nhFyJfm5di4PzJ59FHz5r1pY4OjE2jBMptUsGr7CmY_uCu3ZR1zTOlUcR64cXQLioDnkHIfxIqAA" -H "anthropic-version: 2023-06-01""#,
                r#"curl https://api.anthropic.com/v1/messages -H "x-api-key: [REDACTED:anthropic-api-key]" -H "anthropic-version: 2023-06-01""#,
            ),
            (
                "slack-token",
                "SLACK_BOT_TOKEN=xoxb-646288975140-2614014193141-DavJA76rNicHTp8hkqdlm7tO\nSLACK_CHANNEL=#deploys",
                "SLACK_BOT_TOKEN=[REDACTED:slack-token]\nSLACK_CHANNEL=#deploys",
            ),
            (
                "slack-webhook",
                r#"curl -X POST -d '{"text":"deploy done"}' https://hooks.slack.com/services/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"#,
                r#"curl -X POST -d '{"text":"deploy done"}' https://hooks.slack.com/services/[REDACTED:slack-webhook]"#,
            ),
            ("stripe-key", r#"stripe.api_key = "sk_live_14TUOizwd1iaeOV4qBkdfQ1y""#, r#"stripe.api_key = "[REDACTED:stripe-key]""#),
            (
                "stripe-key",
                "charge failed with 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: card_declined",
                "charge failed with [REDACTED:stripe-key]: card_declined",
            ),
            (
                "google-api-key",
                "GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=AIzacDkdfrUnW5gcF_Ha6ili8GjHEAD6-Wj9Kfz HTTP/1.1",
                "GET https://maps.googleapis.com/maps/api/geocode/json?address=Paris&key=[REDACTED:google-api-key] HTTP/1.1",
            ),
            (
                "jwt",
                "Set-Cookie: session=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ1Xzg4NDEiLCJleHAiOjE3MzU2ODk2MDB9.575yx8xm5MslfY5ubiheyEd7P4zDL_ak6J0kGODKdin; Path=/; HttpOnly",
                "Set-Cookie: session=[REDACTED:jwt]; Path=/; HttpOnly",
            ),
            (
                "private-key",
                "key.pem:\n-----BEGIN RSA PRIVATE KEY-----\nZhvYSmIR9QTYrwA2Ne3pDXhg+rVlaxKQoTLHrEVWFk9VA/ZowuweIj+0GQIPd8x8\nLa6PMHKCMPy7xCFrpGIdZWv9NgBF3fj5zZdN/+IFNS9k/tqapJMZCv0lNnFCAsWc\n-----END RSA PRIVATE KEY-----\nwritten",
                "key.pem:\n[REDACTED:private-key]\nwritten",
            ),
            (
                "private-key",
                r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nZhvYSmIR9QTYrwA2Ne3pDXhg+rVlaxKQoTLHrEVWFk9VA/ZowuweIj+0GQIPd8x8\nLa6PMHKCMPy7xCFrpGIdZWv9NgBF3fj5zZdN/+IFNS9k/tqapJMZCv0lNnFCAsWc\n-----END PRIVATE KEY-----\n", "client_email": "bot@proj.iam.gserviceaccount.com"}"#,
                r#"{"type": "service_account", "private_key": "[REDACTED:private-key]\n", "client_email": "bot@proj.iam.gserviceaccount.com"}"#,
            ),
            (
                "bearer-token",
                r#"curl -H "Authorization: Bearer SWOpQaPRYpzbLGViYXjU2JgJngKtFI3~OyV2dZAkg05" https://api.acme.dev/v1/me"#,
                r#"curl -H "Authorization: Bearer [REDACTED:bearer-token]" https://api.acme.dev/v1/me"#,
            ),
            (
                "bearer-token",
                r#"{"headers": {"Authorization": "Bearer tjRNmHkW5vQ7CF5p9x2LqZ"}}"#,
                r#"{"headers": {"Authorization": "Bearer [REDACTED:bearer-token]"}}"#,
            ),
            (
                "basic-auth-url",
                "DATABASE_URL=postgres://app_user:Zq8vR2mT9xLw@db.internal:5432/app",
                "DATABASE_URL=postgres://app_user:[REDACTED:basic-auth-url]@db.internal:5432/app",
            ),
            ("secret-assignment", "DB_HOST=db.internal\nDB_PASSWORD=hunter2-Long!x\nDB_PORT=5432\n", "DB_HOST=db.internal\nDB_PASSWORD=[REDACTED:secret-assignment]\nDB_PORT=5432\n"),
            (
                "secret-assignment",
                "oauth:\n  client_id: web-app\n  client_secret: \"8f3kQ9zLm2Xv7RtP\"\n",
                "oauth:\n  client_id: web-app\n  client_secret: \"[REDACTED:secret-assignment]\"\n",
            ),
            ("secret-assignment", "passphrase=\"correct horse battery staple\"", "passphrase=\"[REDACTED:secret-assignment]\""),
            (
                "secret-assignment",
                "GET /callback?state=af31&access_token=tjRNmHkW5vQ7CF5p&scope=read 200",
                "GET /callback?state=af31&access_token=[REDACTED:secret-assignment]&scope=read 200",
            ),
            (
                "secret-assignment",
                r#"login ok user=bob password='dNl9cDo#!GbV' from 10.0.0.7"#,
                r#"login ok user=bob password='[REDACTED:secret-assignment]' from 10.0.0.7"#,
            ),
            (
                "secret-assignment",
                r#"{\"user\": \"bob\", \"apiKey\": \"tjRNmHkW5vQ7CF5p\"}"#,
                r#"{\"user\": \"bob\", \"apiKey\": \"[REDACTED:secret-assignment]\"}"#,
            ),
        ]
    }

    fn redact_with(redactor: &Redactor, text: &str) -> (String, Redactions) {
        let mut counts = Redactions::new();
        let out = redactor.redact(text, &mut counts).into_owned();
        (out, counts)
    }

    fn builtin() -> Redactor {
        Redactor::new(&RedactOptions::default()).unwrap()
    }

    fn counts_of(pairs: &[(&str, u64)]) -> Redactions {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn every_builtin_rule_redacts_its_sample() {
        let redactor = builtin();
        for (rule, input, expected) in secret_samples() {
            let (out, counts) = redact_with(&redactor, input);
            assert_eq!(out, expected, "rule {rule}");
            let want = if rule == "aws-secret-access-key" && input.contains("ASIA") {
                counts_of(&[("aws-access-key-id", 1), (rule, 1)])
            } else {
                counts_of(&[(rule, 1)])
            };
            assert_eq!(counts, want, "rule {rule}: {input}");
        }
        let named: std::collections::BTreeSet<&str> = secret_samples().iter().map(|s| s.0).collect();
        let all: std::collections::BTreeSet<&str> = BUILTINS.iter().map(|b| b.name).collect();
        assert_eq!(named, all, "a sample for every built-in rule");
    }

    #[test]
    fn private_key_variants() {
        let redactor = builtin();
        let body = "ZhvYSmIR9QTYrwA2Ne3pDXhg+rVlaxKQoTLHrEVWFk9VA/ZowuweIj+0GQIPd8x8\nLa6PMHKCMPy7xCFrpGIdZWv9NgBF3fj5zZdN/+IFNS9k/tqapJMZCv0lNnFCAsWc\n";
        let indented: String = body.lines().map(|l| format!("    {l}\n")).collect();
        let cases = [
            (format!("-----BEGIN OPENSSH PRIVATE KEY-----\r\n{}-----END OPENSSH PRIVATE KEY-----\r\n", body.replace('\n', "\r\n")), "[REDACTED:private-key]\r\n".to_owned()),
            (
                format!("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,8A2B6C1D9E0F7A3B5C4D6E8F0A1B2C3D\n\n{body}-----END RSA PRIVATE KEY-----"),
                "[REDACTED:private-key]".to_owned(),
            ),
            (format!("x -----BEGIN ENCRYPTED PRIVATE KEY-----\n{body}-----END ENCRYPTED PRIVATE KEY----- y"), "x [REDACTED:private-key] y".to_owned()),
            (
                format!("-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\n{body}=Xq3f\n-----END PGP PRIVATE KEY BLOCK-----"),
                "[REDACTED:private-key]".to_owned(),
            ),
            (
                format!("tls:\n  key: |\n    -----BEGIN EC PRIVATE KEY-----\n{indented}    -----END EC PRIVATE KEY-----\n  cert: none"),
                "tls:\n  key: |\n    [REDACTED:private-key]\n  cert: none".to_owned(),
            ),
            // An unclosed block is no secret, and does not hide one further on.
            (format!("-----BEGIN PRIVATE KEY-----\n{body}and then the text goes on; {GHP}"), format!("-----BEGIN PRIVATE KEY-----\n{body}and then the text goes on; [REDACTED:github-token]")),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_with(&redactor, &input).0, expected);
        }
    }

    #[test]
    fn several_secrets_on_one_line_and_counts_add_up() {
        let redactor = builtin();
        let text = format!("a={GHP} b={GHP} jwt {JWT} key AKIAEJVQTIA4D5RGN5S7");
        let mut counts = counts_of(&[("github-token", 1)]);
        let out = redactor.redact(&text, &mut counts);
        assert_eq!(out, "a=[REDACTED:github-token] b=[REDACTED:github-token] jwt [REDACTED:jwt] key [REDACTED:aws-access-key-id]");
        assert_eq!(counts, counts_of(&[("aws-access-key-id", 1), ("github-token", 3), ("jwt", 1)]));
    }

    #[test]
    fn a_rejected_candidate_does_not_hide_a_later_secret() {
        let redactor = builtin();
        let cases = [
            (format!("token: null {GHP}"), "token: null [REDACTED:github-token]".to_owned()),
            (
                format!("ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx {GHP}"),
                "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx [REDACTED:github-token]".to_owned(),
            ),
            (format!("AKIAIOSFODNN7EXAMPLE,{GHP}"), "AKIAIOSFODNN7EXAMPLE,[REDACTED:github-token]".to_owned()),
            (format!("api_key=process.env.API_KEY; password={JWT}"), "api_key=process.env.API_KEY; password=[REDACTED:jwt]".to_owned()),
            (format!("Bearer of news, Bearer {JWT}"), "Bearer of news, Bearer [REDACTED:jwt]".to_owned()),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_with(&redactor, &input).0, expected);
        }
    }

    #[test]
    fn look_alikes_survive() {
        let redactor = builtin();
        let mut gen = Gen(42);
        let image = format!("<img src=\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA{}==\">", gen.b64(6000));
        let blob = gen.b64(8192);
        let long_hex = gen.hex(64);
        let fixed = [
            "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 (HEAD -> main)",
            "9fceb02 Fix the flaky test; merged 1a2b3c4d into main",
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "request_id=123e4567-e89b-12d3-a456-426614174000 trace=4bf92f3577b34da6a3ce929d0e0e4736",
            "\"integrity\": \"sha512-t9bX+59zUhPUCEffmwqttUeSWk+mypAEpCJndDAGxNREPMckywz7oR1yG6GJp6POXvUTrzIz0nlBLbYCwXiItg==\",",
            "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxx",
            "set OPENAI_API_KEY to sk-... or sk-your-key-here",
            "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "ghp_EXAMPLE0123456789abcdefghijklmnopqrs and sk_live_placeholder0123456789abcdefgh",
            "SLACK_TOKEN=xoxb-your-slack-token-here",
            "OPENAI_API_KEY=sk-proj-dummydummydummydummydummydummydummydummy12",
            "password=<your-password>",
            "password=${DB_PASSWORD}",
            "password: ********",
            "token: null",
            "password=\"\"",
            "api_key=process.env.API_KEY",
            "api_key = os.environ[\"API_KEY\"]",
            "const client = new Client({ apiKey: config.apiKey });",
            "Please enter your password to continue.",
            "password: required",
            "token: string; password: String, secret: Option<String>",
            "{\"password\": \"This field is required.\"}",
            "password: \"Must be at least 8 characters\"",
            "token_type: Bearer, expires_in: 3600, secret: true",
            "password = getpass.getpass(); token = get_token()",
            "github_token: ${{ secrets.GITHUB_TOKEN }}; TOKEN=$(cat /run/secrets/token)",
            "pk_live_uzQqmOBZZW6m4nyoL6uniiFw pk_test_152cTe8r0khCEr7n1AyOHFRu",
            "see https://github.com/acme/app/blob/main/README.md and http://localhost:8080/health?x=1",
            // Words that end in a token's prefix, the rest long enough to be one.
            "see /help/desk-admin-guide-for-configuring-single-sign-on-with-okta for details",
            "branch task-admin-migrate-legacy-billing-records-to-new-ledger merged",
            "ran network_test_HandlesReconnectionGracefully and benchmark_test_ParallelWriteThroughput",
            "job risk-proj-quarterly-exposure-report-generation-pipeline-v2 done",
            "id: ask-proj-0123456789abcdefghijklmnopqrstuvwxyzABCD",
            "axoxb-integration-settings-page-for-the-workspace and ungldt-migration-notes-for-the-team",
            "ssh://git@github.com/acme/app.git and postgres://user:password@localhost/db",
            "The Bearer token scheme (RFC 6750): send Authorization: Bearer <token>",
            "PWD=/home/alice/project OLDPWD=/home/alice",
            "{\"nextPageToken\": \"CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA0\", \"max_tokens\": 4096}",
            "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----",
            "版本 1.2.3 发布于 2024-01-15，密码需要至少 12 个字符 🙂",
        ];
        for text in fixed.iter().copied().chain([image.as_str(), blob.as_str(), long_hex.as_str()]) {
            let (out, counts) = redact_with(&redactor, text);
            assert_eq!(out, text);
            assert!(counts.is_empty(), "{text}: {counts:?}");
        }
    }

    #[test]
    fn multibyte_text_next_to_a_secret_stays_intact() {
        let redactor = builtin();
        let text = format!("密码 {GHP} 🙂\n令牌={GHP}结束 émoji🙂{JWT}🙂");
        let (out, counts) = redact_with(&redactor, &text);
        assert_eq!(out, "密码 [REDACTED:github-token] 🙂\n令牌=[REDACTED:github-token]结束 émoji🙂[REDACTED:jwt]🙂");
        assert_eq!(counts, counts_of(&[("github-token", 2), ("jwt", 1)]));
    }

    #[test]
    fn many_keys_that_redact_alike_and_many_unclosed_markers_cost_linear_time() {
        let redactor = builtin();
        let mut map = serde_json::Map::new();
        for i in 1..=4_000u64 {
            // Eight letters from the number, scattered (a run of one letter would read as a placeholder).
            let tail: String = format!("{:08x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32).bytes().map(|d| (b'g' + d % 16) as char).collect();
            map.insert(format!("ghp_Zq4R8sT2vW6xY1bN3mK5pL7jH9gF{tail}"), Value::from(i));
        }
        let mut value = Value::Object(map);
        redactor.redact_value(&mut value, &mut Redactions::new());
        let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
        assert_eq!((keys.len(), keys[0].as_str(), keys[3_999].as_str()), (4_000, "[REDACTED:github-token]", "[REDACTED:github-token] (4000)"));
        let mut unclosed = serde_json::json!({ "password": format!("{}]", "[REDACTED:".repeat(40_000)) });
        redactor.redact_value(&mut unclosed, &mut Redactions::new());
        assert_eq!(unclosed["password"], "[REDACTED:secret-field]");
    }

    #[test]
    fn only_markers_of_its_own_rules_count_as_redacted_already() {
        let redactor = builtin();
        let mut value = serde_json::json!({ "password": "[REDACTED:hunter2-Xq9]", "token": "[REDACTED:github-token]" });
        redactor.redact_value(&mut value, &mut Redactions::new());
        assert_eq!(value, serde_json::json!({ "password": "[REDACTED:secret-field]", "token": "[REDACTED:github-token]" }));
    }

    #[test]
    fn nothing_found_borrows() {
        let mut counts = Redactions::new();
        assert!(matches!(builtin().redact("plain text, nothing secret", &mut counts), Cow::Borrowed(_)));
        assert!(counts.is_empty());
    }

    #[test]
    fn redact_value_walks_nested_values_and_secret_named_keys() {
        let redactor = builtin();
        let mut value = serde_json::json!({
            "db": {"password": "hunter2-Long!x", "host": "db.internal", "port": 5432},
            "placeholders": {"password": "${PW}", "api_key": "your-api-key", "token": null, "secret": "", "pwd": "****", "enabled": true},
            "items": [{"note": format!("uses {GHP}")}, [[format!("deep {JWT}")]]],
            "auth": {"accessToken": 123456789, "refresh-token": "r8Kq2LmZ7vX", "Authorization": format!("Bearer {GHP}")},
            "nextPageToken": "CiAKGjBpNDd2Nmp2",
            GHP: "a key is redacted like any text",
            "also": {"password": format!("hunter2 {GHP}"), "pwd": "[REDACTED:x] hunter2-again", "secret": "[REDACTED:jwt]"},
        });
        let mut counts = Redactions::new();
        redactor.redact_value(&mut value, &mut counts);
        assert_eq!(
            value,
            serde_json::json!({
                "db": {"password": "[REDACTED:secret-field]", "host": "db.internal", "port": 5432},
                "placeholders": {"password": "${PW}", "api_key": "your-api-key", "token": null, "secret": "", "pwd": "****", "enabled": true},
                "items": [{"note": "uses [REDACTED:github-token]"}, [["deep [REDACTED:jwt]"]]],
                // A secret-named field goes whole, even when a part of it is a secret of another shape.
                "auth": {"accessToken": "[REDACTED:secret-field]", "refresh-token": "[REDACTED:secret-field]", "Authorization": "[REDACTED:secret-field]"},
                "nextPageToken": "CiAKGjBpNDd2Nmp2",
                "[REDACTED:github-token]": "a key is redacted like any text",
                // Not partly: a token or a redaction marker inside does not hide the rest of the secret.
                "also": {"password": "[REDACTED:secret-field]", "pwd": "[REDACTED:secret-field]", "secret": "[REDACTED:jwt]"},
            })
        );
        assert_eq!(counts, counts_of(&[("github-token", 2), ("jwt", 1), ("secret-field", 6)]));
        let mut twins = serde_json::json!({ GHP: 2, "ghp_Zq4R8sT2vW6xY1bN3mK5pL7jH9gF0dC2aE4x": 3 });
        redactor.redact_value(&mut twins, &mut Redactions::new());
        assert_eq!(twins, serde_json::json!({ "[REDACTED:github-token]": 2, "[REDACTED:github-token] (2)": 3 }), "keys that redact alike stay apart");
    }

    #[test]
    fn redact_value_handles_very_deep_nesting() {
        let mut value = Value::String(format!("x {GHP}"));
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let mut counts = Redactions::new();
        builtin().redact_value(&mut value, &mut counts);
        assert_eq!(counts, counts_of(&[("github-token", 1)]));
        // Dropping a value this deep recurses; unwrap it iteratively.
        while let Value::Array(mut items) = value {
            value = items.pop().unwrap();
        }
        assert_eq!(value, "x [REDACTED:github-token]");
    }

    #[test]
    fn user_patterns_literals_and_env() {
        // Names of their own keep parallel tests apart.
        std::env::set_var("TOOLGATE_REDACT_TEST_DB_PASS", "s3cr3t.value+1");
        std::env::set_var("TOOLGATE_REDACT_TEST_SHORT", "abc");
        let options: RedactOptions = serde_json::from_value(serde_json::json!({
            "builtin": false,
            "patterns": [{"name": "ticket", "pattern": r"TCK-[0-9]{6}"}, r"internal-[a-z]+\.corp"],
            "literals": ["a.b*c(d)", "hunter2"],
            "env": ["TOOLGATE_REDACT_TEST_DB_PASS", "TOOLGATE_REDACT_TEST_SHORT", "TOOLGATE_REDACT_TEST_UNSET"],
        }))
        .unwrap();
        let redactor = Redactor::new(&options).unwrap();
        let text = format!("TCK-123456 on internal-build.corp: a.b*c(d) axbbc hunter2 s3cr3t.value+1 abc {GHP}");
        let (out, counts) = redact_with(&redactor, &text);
        assert_eq!(
            out,
            format!(
                "[REDACTED:ticket] on [REDACTED:custom]: [REDACTED:literal] axbbc [REDACTED:literal] [REDACTED:env:TOOLGATE_REDACT_TEST_DB_PASS] abc {GHP}"
            )
        );
        assert_eq!(counts, counts_of(&[("custom", 1), ("env:TOOLGATE_REDACT_TEST_DB_PASS", 1), ("literal", 2), ("ticket", 1)]));
        assert!(!redactor.is_empty());
    }

    #[test]
    fn literals_prefer_the_longest() {
        let options = RedactOptions { literals: vec!["abc".into(), "abcdef".into()], ..RedactOptions::default() };
        let (out, counts) = redact_with(&Redactor::new(&options).unwrap(), "x abcdef abc");
        assert_eq!(out, "x [REDACTED:literal] [REDACTED:literal]");
        assert_eq!(counts, counts_of(&[("literal", 2)]));
    }

    #[test]
    fn user_patterns_that_do_not_combine_run_on_their_own() {
        let options = RedactOptions {
            patterns: vec![
                UserPattern { name: Some("a".into()), pattern: r"(?P<id>AB[0-9]{4})".into() },
                UserPattern { name: Some("b".into()), pattern: r"(?P<id>CD[0-9]{4})".into() },
            ],
            ..RedactOptions::default()
        };
        let redactor = Redactor::new(&options).unwrap();
        assert_eq!(redactor.matchers.len(), 2);
        let (out, counts) = redact_with(&redactor, &format!("AB1234 CD5678 {GHP}"));
        assert_eq!(out, "[REDACTED:a] [REDACTED:b] [REDACTED:github-token]");
        assert_eq!(counts, counts_of(&[("a", 1), ("b", 1), ("github-token", 1)]));
    }

    #[test]
    fn emails_and_phones_only_when_asked() {
        let text = "Contact jane.doe@acme-corp.io or +1 (415) 555-2671, office 415-555-2671, Berlin +49 30 901820 99.";
        assert_eq!(redact_with(&builtin(), text).0, text);
        let options = RedactOptions { emails: true, phones: true, ..RedactOptions::default() };
        let (out, counts) = redact_with(&Redactor::new(&options).unwrap(), text);
        assert_eq!(out, "Contact [REDACTED:email] or [REDACTED:phone], office [REDACTED:phone], Berlin [REDACTED:phone].");
        assert_eq!(counts, counts_of(&[("email", 1), ("phone", 3)]));
    }

    #[test]
    fn phones_and_emails_spare_dates_versions_ids_and_addresses() {
        let options = RedactOptions { emails: true, phones: true, ..RedactOptions::default() };
        let redactor = Redactor::new(&options).unwrap();
        for text in [
            "released 2024-01-15, build 2024.01.15.1234",
            "version 1.2.3.4 and 10.20.300.4000",
            "at 2024-01-15T10:20:30+05:30 and 2024-01-15 10:20:30.123456789",
            "order 12345678901234 user 9876543210",
            "host 192.168.100.200 port 8080",
            "logo@2x.png and npm i react@18.2.0",
            "1.0.0+20130313144700 and +0000",
            "id 555-123-4567-89 and v555.123.4567",
        ] {
            let (out, counts) = redact_with(&redactor, text);
            assert_eq!(out, text);
            assert!(counts.is_empty(), "{text}: {counts:?}");
        }
    }

    #[test]
    fn pathological_user_patterns_run_in_linear_time() {
        for pattern in [r"(a+)+$", r"(x+x+)+y"] {
            let options = RedactOptions {
                builtin: false,
                patterns: vec![UserPattern { name: None, pattern: pattern.into() }],
                ..RedactOptions::default()
            };
            let redactor = Redactor::new(&options).unwrap();
            let text = format!("{}!", pattern[1..2].repeat(100_000));
            let start = Instant::now();
            let (out, _) = redact_with(&redactor, &text);
            assert!(start.elapsed() < Duration::from_secs(2), "{pattern}: {:?}", start.elapsed());
            assert_eq!(out, text);
        }
    }

    #[test]
    fn bad_options_give_actionable_errors() {
        let bad = |options: RedactOptions| Redactor::new(&options).err().unwrap();
        let pattern = |name: Option<&str>, pattern: &str| RedactOptions {
            patterns: vec![UserPattern { name: name.map(str::to_owned), pattern: pattern.into() }],
            ..RedactOptions::default()
        };
        let err = bad(pattern(None, "(unclosed"));
        assert!(err.contains("\"(unclosed\"") && err.contains("invalid regex"), "{err}");
        let err = bad(pattern(Some("has space"), "x"));
        assert!(err.contains("has space") && err.contains("A-Z"), "{err}");
        let err = bad(pattern(None, "a*"));
        assert!(err.contains("empty string"), "{err}");
        let err = bad(RedactOptions { literals: vec!["ok".into(), String::new()], ..RedactOptions::default() });
        assert!(err.contains("literals[1] is empty"), "{err}");
        let err = bad(RedactOptions { env: vec!["BAD NAME".into()], ..RedactOptions::default() });
        assert!(err.contains("BAD NAME"), "{err}");
    }

    #[test]
    fn options_deserialize() {
        let options: RedactOptions = serde_json::from_str(r#"{"patterns": ["x[0-9]+", {"pattern": "y+"}], "emails": true}"#).unwrap();
        assert!(options.builtin && options.emails && !options.phones);
        assert_eq!(options.patterns[0].pattern, "x[0-9]+");
        assert_eq!(options.patterns[1].name, None);
        assert!(serde_json::from_str::<RedactOptions>(r#"{"patterns": [{"pattern": "x", "flags": "i"}]}"#).is_err());
        assert!(serde_json::from_str::<RedactOptions>(r#"{"colors": true}"#).is_err());
        let off = Redactor::new(&RedactOptions { builtin: false, ..RedactOptions::default() }).unwrap();
        assert!(off.is_empty());
        let mut counts = Redactions::new();
        assert_eq!(off.redact(GHP, &mut counts), GHP);
    }

    #[test]
    fn redactor_is_shareable_and_cheap_to_build() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Redactor>();
        builtin();
        let start = Instant::now();
        builtin();
        assert!(start.elapsed() < Duration::from_millis(5));
    }

    /// The first and the best of three runs.
    fn time(redactor: &Redactor, text: &str) -> (Duration, Duration, Redactions) {
        let mut runs = Vec::new();
        let mut counts = Redactions::new();
        for _ in 0..3 {
            counts.clear();
            let start = Instant::now();
            std::hint::black_box(redactor.redact(text, &mut counts));
            runs.push(start.elapsed());
        }
        (runs[0], runs.iter().copied().min().unwrap(), counts)
    }

    #[test]
    #[ignore = "timing; run in release: cargo test --release -p toolgate-core --lib redact -- --ignored --nocapture"]
    fn timing_10_mib() {
        let redactor = Redactor::new(&RedactOptions::default()).unwrap();
        let clean = ordinary_text(10 << 20, 0x9E37_79B9_7F4A_7C15);
        let (first, best, counts) = time(&redactor, &clean);
        assert!(counts.is_empty(), "ordinary text lost data: {counts:?}");
        println!("10 MiB ordinary text: first {first:?}, best {best:?}");

        let samples = secret_samples();
        let mut laden = String::with_capacity(clean.len() + 100_000);
        let lines: Vec<&str> = clean.split_inclusive('\n').collect();
        let step = lines.len() / 250;
        for (i, line) in lines.iter().enumerate() {
            laden.push_str(line);
            if i % step == step / 2 {
                let (_, sample, _) = samples[(i / step) % samples.len()];
                laden.push_str(sample);
                laden.push('\n');
            }
        }
        let (first, best, counts) = time(&redactor, &laden);
        let total: u64 = counts.values().sum();
        assert!(total >= 250, "{counts:?}");
        println!("10 MiB with {total} secrets: first {first:?}, best {best:?}");

        let all = Redactor::new(&RedactOptions { emails: true, phones: true, ..RedactOptions::default() }).unwrap();
        let (first, best, _) = time(&all, &clean);
        println!("10 MiB ordinary text, emails and phones on: first {first:?}, best {best:?}");
    }
}
