//! How the description's either-or values are read from JSON. serde's untagged enums buffer each
//! value and try every variant in turn; a whole table holds tens of thousands of them (a rule's
//! match values and verdict, a set's elements), so each is read here in one pass, by what the JSON
//! holds: a number, a string, a list or an object.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, StrDeserializer};
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::model::{Atom, Element, OneOrMany};
use crate::rule::{MatchValue, SimpleVerdict, Verdict, Vmap};

impl<'de> Deserialize<'de> for Atom {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AtomVisitor)
    }
}

struct AtomVisitor;

impl<'de> Visitor<'de> for AtomVisitor {
    type Value = Atom;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number (0 or more) or a string")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Atom, E> {
        Ok(Atom::Number(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Atom, E> {
        Ok(Atom::Text(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Atom, E> {
        Ok(Atom::Text(v))
    }
}

impl<'de> Deserialize<'de> for Element {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ElementVisitor;
        impl<'de> Visitor<'de> for ElementVisitor {
            type Value = Element;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value (a number or a string) or a list of values (a concatenation)")
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Element, E> {
                AtomVisitor.visit_u64(v).map(Element::One)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Element, E> {
                AtomVisitor.visit_str(v).map(Element::One)
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<Element, E> {
                AtomVisitor.visit_string(v).map(Element::One)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Element, A::Error> {
                atoms(seq).map(Element::Concat)
            }
        }
        deserializer.deserialize_any(ElementVisitor)
    }
}

fn atoms<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<Vec<Atom>, A::Error> {
    let mut atoms = Vec::with_capacity(seq.size_hint().unwrap_or(0));
    while let Some(atom) = seq.next_element()? {
        atoms.push(atom);
    }
    Ok(atoms)
}

/// A name (`"ip saddr"`, `"ipv4_addr"`) or a list of them (a concatenation).
impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OneOrManyVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for OneOrManyVisitor<T> {
            type Value = OneOrMany<T>;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a name or a list of names")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany<T>, E> {
                T::deserialize(StrDeserializer::new(v)).map(OneOrMany::One)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany<T>, A::Error> {
                let mut many = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(one) = seq.next_element()? {
                    many.push(one);
                }
                Ok(OneOrMany::Many(many))
            }
        }
        deserializer.deserialize_any(OneOrManyVisitor(PhantomData))
    }
}

impl<'de> Deserialize<'de> for MatchValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MatchValueVisitor;
        impl<'de> Visitor<'de> for MatchValueVisitor {
            type Value = MatchValue;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"a value, a list of values (an anonymous set) or {"set": name}"#)
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MatchValue, E> {
                AtomVisitor.visit_u64(v).map(MatchValue::One)
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<MatchValue, E> {
                AtomVisitor.visit_str(v).map(MatchValue::One)
            }

            fn visit_string<E: de::Error>(self, v: String) -> Result<MatchValue, E> {
                AtomVisitor.visit_string(v).map(MatchValue::One)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<MatchValue, A::Error> {
                atoms(seq).map(MatchValue::List)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<MatchValue, A::Error> {
                Deserialize::deserialize(MapAccessDeserializer::new(map)).map(MatchValue::Set)
            }
        }
        deserializer.deserialize_any(MatchValueVisitor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum VerdictKind {
    Jump,
    Goto,
    Vmap,
}

impl<'de> Deserialize<'de> for Verdict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct VerdictVisitor;
        impl<'de> Visitor<'de> for VerdictVisitor {
            type Value = Verdict;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(
                    r#""accept", "drop", "return", "continue", {"jump": chain}, {"goto": chain} or {"vmap": {...}}"#,
                )
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Verdict, E> {
                SimpleVerdict::deserialize(StrDeserializer::new(v)).map(Verdict::Simple)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Verdict, A::Error> {
                let Some(kind) = map.next_key::<VerdictKind>()? else {
                    return Err(de::Error::invalid_length(0, &"one of jump, goto or vmap"));
                };
                let verdict = match kind {
                    VerdictKind::Jump => Verdict::Jump { jump: map.next_value()? },
                    VerdictKind::Goto => Verdict::Goto { goto: map.next_value()? },
                    VerdictKind::Vmap => Verdict::Vmap { vmap: map.next_value::<Vmap>()? },
                };
                if map.next_key::<VerdictKind>()?.is_some() {
                    return Err(de::Error::custom("a verdict is one of jump, goto or vmap, not two"));
                }
                Ok(verdict)
            }
        }
        deserializer.deserialize_any(VerdictVisitor)
    }
}

#[cfg(test)]
mod tests {
    use crate::model::{Atom, Element, KeyType};
    use crate::rule::{Key, MatchValue, Rule, SimpleVerdict, Verdict};

    fn read<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn each_form_reads_as_its_variant() {
        assert_eq!(read::<Atom>("80"), Ok(Atom::Number(80)));
        assert_eq!(read::<Atom>(r#""tcp""#), Ok(Atom::Text("tcp".into())));
        assert_eq!(
            read::<Element>(r#"["10.0.0.1", 6, 80]"#).map(|e| e.to_string()),
            Ok(r#""10.0.0.1" . 6 . 80"#.into())
        );
        assert_eq!(read::<MatchValue>(r#"["a"]"#), Ok(MatchValue::List(vec![Atom::Text("a".into())])));
        assert!(matches!(read::<MatchValue>(r#"{"set": "peers"}"#), Ok(MatchValue::Set(s)) if s.set == "peers"));
        assert_eq!(read::<MatchValue>("53"), Ok(MatchValue::One(Atom::Number(53))));
        assert_eq!(read::<Verdict>(r#""return""#), Ok(Verdict::Simple(SimpleVerdict::Return)));
        assert_eq!(read::<Verdict>(r#"{"goto": "tw-1"}"#), Ok(Verdict::Goto { goto: "tw-1".into() }));
        assert_eq!(read::<KeyType>(r#""ipv4_addr""#).map(|k| k.0.len()), Ok(1));
        assert_eq!(read::<Key>(r#"["ip daddr", "meta l4proto", "th dport"]"#).map(|k| k.0.len()), Ok(3));
        // An escaped string reads as well as a plain one.
        assert_eq!(read::<Verdict>(r#"{"jump": "pi-\u0061"}"#), Ok(Verdict::Jump { jump: "pi-a".into() }));
    }

    #[test]
    fn a_wrong_form_says_what_was_expected() {
        let err = read::<Atom>("-1").unwrap_err();
        assert!(err.contains("a number (0 or more) or a string"), "{err}");
        let err = read::<Verdict>(r#"{"jump": "a", "goto": "b"}"#).unwrap_err();
        assert!(err.contains("not two"), "{err}");
        let err = read::<Verdict>(r#"{"leap": "a"}"#).unwrap_err();
        assert!(err.contains("unknown variant `leap`"), "{err}");
        let err = read::<Verdict>(r#""jump""#).unwrap_err();
        assert!(err.contains("unknown variant `jump`"), "{err}");
        let err = read::<MatchValue>(r#"{"set": "a", "elements": []}"#).unwrap_err();
        assert!(err.contains("unknown field `elements`"), "{err}");
        let err = read::<Key>(r#""ip src""#).unwrap_err();
        assert!(err.contains("unknown variant `ip src`"), "{err}");
        let err = read::<Rule>(r#"{"matches": [{"key": "th dport", "value": 1.5}]}"#).unwrap_err();
        assert!(err.contains("a value, a list of values"), "{err}");
    }
}
