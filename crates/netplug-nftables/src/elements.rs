//! Set keys and elements: a set's type as nf_tables stores it, and each element as the bytes nft
//! sends (interval sets as start and end elements, concatenations padded per field).

use crate::model::{Atom, DataType, Element, KeyType};
use crate::selector::{tlv, tlv_u32};
use crate::types::{Allow, Value, ValueType, successor};

/// A set's key: its fields and how they are laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLayout {
    pub fields: Vec<ValueType>,
    pub interval: bool,
}

/// One element, encoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Encoded {
    /// A hash set's key.
    Key(Vec<u8>),
    /// An interval of a one-field interval set: from `start` up to `end` (exclusive); `None` when
    /// it runs to the last value.
    Interval { start: Vec<u8>, end: Option<Vec<u8>> },
    /// An interval of a concatenation: first and last key (inclusive).
    Ranges { first: Vec<u8>, last: Vec<u8> },
}

impl Encoded {
    /// Whether two intervals of the same set overlap.
    pub fn overlaps(&self, other: &Encoded) -> bool {
        match (self, other) {
            (Encoded::Interval { start: a, end: a_end }, Encoded::Interval { start: b, end: b_end }) => {
                let before = |end: &Option<Vec<u8>>, start: &Vec<u8>| end.as_ref().is_some_and(|end| end <= start);
                !(before(a_end, b) || before(b_end, a))
            }
            _ => false,
        }
    }
}

impl KeyLayout {
    pub fn of(key: &KeyType, interval: bool) -> KeyLayout {
        KeyLayout { fields: key.0.iter().map(|d| ValueType::of(*d)).collect(), interval }
    }

    pub fn concat(&self) -> bool {
        self.fields.len() > 1
    }

    /// NFTA_SET_KEY_TYPE: nft's type id, or a concatenation's ids six bits apart.
    pub fn nft_type(&self) -> u32 {
        self.fields.iter().fold(0, |acc, field| (acc << 6) | field.nft_type())
    }

    /// NFTA_SET_KEY_LEN: a concatenation's fields each take whole 4-byte registers.
    pub fn key_len(&self) -> usize {
        if self.concat() { self.fields.iter().map(|f| padded(f.width())).sum() } else { self.fields[0].width() }
    }

    /// NFTA_SET_FLAGS of a named set (NFT_SET_INTERVAL, NFT_SET_CONCAT with it).
    pub fn flags(&self) -> u32 {
        match (self.interval, self.concat()) {
            (false, _) => 0,
            (true, false) => 0x4,
            (true, true) => 0x84,
        }
    }

    /// The user data nft stores with a named set of this type (NFTNL_UDATA_SET_*): the key's
    /// byte order, and for a concatenation its "typeof" marker.
    pub fn named_set_userdata(&self, map: bool) -> Vec<u8> {
        if self.concat() {
            let mut out = tlv_u32(0, 0);
            let mut nested = tlv_u32(0, 13); // EXPR_CONCAT
            nested.extend(tlv(1, &[]));
            out.extend(tlv(3, &nested));
            return out;
        }
        let order = match self.fields[0] {
            ValueType::Ipv4 | ValueType::Ipv6 | ValueType::Service => 2,
            ValueType::Proto => 0,
            _ => 1,
        };
        let mut out = tlv_u32(0, order);
        if map {
            out.extend(tlv_u32(1, 0)); // NFTNL_UDATA_SET_DATABYTEORDER of a verdict
            out.extend(tlv_u32(6, 0)); // NFTNL_UDATA_SET_DATA_INTERVAL
        }
        out
    }

    /// Parses and encodes one element; the error names the value.
    pub fn encode(&self, element: &Element) -> Result<Encoded, String> {
        let atoms: Vec<&Atom> = match element {
            Element::One(atom) => vec![atom],
            Element::Concat(atoms) => atoms.iter().collect(),
        };
        if atoms.len() != self.fields.len() {
            return Err(format!("{element} has {} field(s); the set's type has {}", atoms.len(), self.fields.len()));
        }
        let allow = Allow { prefix: self.interval, range: self.interval, wildcard: false };
        let values = self
            .fields
            .iter()
            .zip(&atoms)
            .map(|(field, atom)| {
                field.parse(atom, allow).map_err(|err| {
                    if !self.interval && (atom_has(atom, '/') || atom_has(atom, '-')) {
                        format!("{err} (prefixes and ranges need the set's interval flag)")
                    } else {
                        err
                    }
                })
            })
            .collect::<Result<Vec<Value>, String>>()?;
        if !self.concat() {
            let value = &values[0];
            if !self.interval {
                let Value::Exact(bytes) = value else { unreachable!("only exact values without interval") };
                return Ok(Encoded::Key(bytes.clone()));
            }
            let (first, last) = value.bounds();
            return Ok(Encoded::Interval { start: first, end: successor(&last) });
        }
        let (mut first, mut last) = (Vec::new(), Vec::new());
        for (field, value) in self.fields.iter().zip(&values) {
            let (mut low, mut high) = value.bounds();
            // An interval set holds a mark big-endian, as the rule's byteorder expression makes it.
            if self.interval && *field == ValueType::Mark {
                for bytes in [&mut low, &mut high] {
                    *bytes =
                        u32::from_ne_bytes(bytes[..4].try_into().expect("a mark is 4 bytes")).to_be_bytes().to_vec();
                }
            }
            let width = padded(low.len());
            first.extend(&low);
            first.resize(first.len() + width - low.len(), 0);
            last.extend(&high);
            last.resize(last.len() + width - high.len(), 0);
        }
        Ok(if self.interval { Encoded::Ranges { first, last } } else { Encoded::Key(first) })
    }
}

fn atom_has(atom: &Atom, c: char) -> bool {
    matches!(atom, Atom::Text(text) if text.contains(c))
}

/// A field's bytes rounded up to whole 4-byte registers.
pub fn padded(len: usize) -> usize {
    len.div_ceil(4) * 4
}

/// The data types a concatenation's fields need, named for errors.
pub fn type_names(types: &[DataType]) -> String {
    types.iter().map(|t| t.name()).collect::<Vec<_>>().join(" . ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Atom, Element, KeyType};

    fn text(s: &str) -> Atom {
        Atom::Text(s.into())
    }

    #[test]
    fn interval_elements_end_one_past_their_last_value() {
        let layout = KeyLayout::of(&KeyType(vec![DataType::Ipv4Addr]), true);
        assert_eq!(
            layout.encode(&Element::One(text("10.0.0.0/8"))),
            Ok(Encoded::Interval { start: vec![10, 0, 0, 0], end: Some(vec![11, 0, 0, 0]) })
        );
        assert_eq!(
            layout.encode(&Element::One(text("255.255.255.0/24"))),
            Ok(Encoded::Interval { start: vec![255, 255, 255, 0], end: None })
        );
        let a = layout.encode(&Element::One(text("10.0.0.0/8"))).unwrap();
        let b = layout.encode(&Element::One(text("10.1.0.0/16"))).unwrap();
        let c = layout.encode(&Element::One(text("11.0.0.0/8"))).unwrap();
        assert!(a.overlaps(&b));
        assert!(!a.overlaps(&c));
    }

    #[test]
    fn concatenations_pad_each_field() {
        let key = KeyType(vec![DataType::Ipv4Addr, DataType::InetProto, DataType::InetService]);
        let layout = KeyLayout::of(&key, false);
        assert_eq!(layout.nft_type(), 0x730d);
        assert_eq!(layout.key_len(), 12);
        let element = Element::Concat(vec![text("10.1.1.1"), text("tcp"), Atom::Number(80)]);
        assert_eq!(layout.encode(&element), Ok(Encoded::Key(vec![10, 1, 1, 1, 6, 0, 0, 0, 0, 80, 0, 0])));
        assert!(layout.encode(&Element::One(text("10.1.1.1"))).is_err());
    }
}
