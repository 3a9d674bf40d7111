//! Length-bounded containers that decode safely from untrusted SCALE input.
//!
//! [`Bounded<T, N>`] encodes exactly like `Vec<T>`, but decoding rejects more than `N` elements *before*
//! allocating, so an extrinsic argument cannot make the runtime allocate unbounded memory, and it has a
//! `MaxEncodedLen` so it can live in storage.

use alloc::{string::String, vec::Vec};
use codec::{Compact, Decode, DecodeWithMemTracking, Encode, Input, MaxEncodedLen};
use core::ops::Deref;
use scale_info::{Type, TypeInfo};

/// A `Vec<T>` of at most `N` elements.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Bounded<T, const N: u32>(Vec<T>);

impl<T, const N: u32> Bounded<T, N> {
    /// Wraps `items`, or gives them back if there are more than `N`.
    pub fn new(items: Vec<T>) -> Result<Self, Vec<T>> {
        if items.len() as u64 > N as u64 {
            Err(items)
        } else {
            Ok(Bounded(items))
        }
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        &self.0
    }

    /// The elements, by value.
    pub fn into_inner(self) -> Vec<T> {
        self.0
    }
}

impl<T, const N: u32> Deref for Bounded<T, N> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T: Encode, const N: u32> Encode for Bounded<T, N> {
    fn size_hint(&self) -> usize {
        self.0.size_hint()
    }
    fn encode_to<W: codec::Output + ?Sized>(&self, dest: &mut W) {
        self.0.encode_to(dest)
    }
}

impl<T: Decode, const N: u32> Decode for Bounded<T, N> {
    fn decode<I: Input>(input: &mut I) -> Result<Self, codec::Error> {
        let len = Compact::<u32>::decode(input)?.0;
        if len > N {
            return Err("Bounded: too many elements".into());
        }
        let mut items = Vec::with_capacity(len as usize);
        for _ in 0..len {
            items.push(T::decode(input)?);
        }
        Ok(Bounded(items))
    }
}

impl<T: DecodeWithMemTracking, const N: u32> DecodeWithMemTracking for Bounded<T, N> {}

impl<T: MaxEncodedLen, const N: u32> MaxEncodedLen for Bounded<T, N> {
    fn max_encoded_len() -> usize {
        Compact(N).encoded_size().saturating_add((N as usize).saturating_mul(T::max_encoded_len()))
    }
}

/// Described to clients as the plain `Vec<T>` it encodes as. (A named generic wrapper would give
/// every instance the same name in the metadata, and polkadot.js would confuse `Bounded<u8>` with
/// `Bounded<BoundedString>`.)
impl<T: TypeInfo + 'static, const N: u32> TypeInfo for Bounded<T, N> {
    type Identity = Vec<T>;
    fn type_info() -> Type {
        Vec::<T>::type_info()
    }
}

/// A UTF-8 string of at most `N` bytes (a data URI: `N` is the `jobMarket.maxUriLength`
/// constant). Encoded as its bytes (`Vec<u8>`; polkadot.js: give it as hex, `stringToHex(uri)`,
/// so that a URI is never read as hex itself); JSON: a string. A longer one does not decode: the
/// node refuses the whole transaction before it reaches the pool, so check the length first.
#[derive(
    Clone,
    PartialEq,
    Eq,
    Debug,
    Default,
    Encode,
    Decode,
    DecodeWithMemTracking,
    TypeInfo,
    MaxEncodedLen,
)]
#[scale_info(capture_docs = "always")]
pub struct BoundedString<const N: u32>(pub Bounded<u8, N>);

impl<const N: u32> BoundedString<N> {
    /// The string, if it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        core::str::from_utf8(&self.0).ok()
    }

    /// Wraps `s`, or returns `None` when it is longer than `N` bytes.
    // Not `FromStr`: the error is just "too long", and `Option` says that.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(s: &str) -> Option<Self> {
        Bounded::new(s.as_bytes().to_vec()).ok().map(BoundedString)
    }

    /// The string, lossily.
    pub fn to_string_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

#[cfg(feature = "std")]
mod serde_impls {
    use super::*;
    use serde::{de::Error, Deserialize, Deserializer, Serialize, Serializer};

    impl<T: Serialize, const N: u32> Serialize for Bounded<T, N> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            self.0.serialize(s)
        }
    }

    impl<'de, T: Deserialize<'de>, const N: u32> Deserialize<'de> for Bounded<T, N> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let items = Vec::<T>::deserialize(d)?;
            let len = items.len();
            Bounded::new(items)
                .map_err(|_| D::Error::custom(format!("{len} elements, at most {N} allowed")))
        }
    }

    impl<const N: u32> Serialize for BoundedString<N> {
        fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.serialize_str(&self.to_string_lossy())
        }
    }

    impl<'de, const N: u32> Deserialize<'de> for BoundedString<N> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let s = String::deserialize(d)?;
            BoundedString::from_str(&s).ok_or_else(|| {
                D::Error::custom(format!("string of {} bytes, at most {N} allowed", s.len()))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_rejects_more_than_the_bound_before_allocating() {
        let five = vec![1u8, 2, 3, 4, 5].encode();
        assert!(Bounded::<u8, 4>::decode(&mut &five[..]).is_err());
        assert_eq!(Bounded::<u8, 5>::decode(&mut &five[..]).unwrap().as_slice(), &[1, 2, 3, 4, 5]);
        // A huge claimed length with no data fails fast.
        let lie = Compact(u32::MAX).encode();
        assert!(Bounded::<u8, 1024>::decode(&mut &lie[..]).is_err());
    }

    #[test]
    fn encodes_like_a_vec_and_bounds_max_encoded_len() {
        let b = Bounded::<u16, 3>::new(vec![7, 8]).unwrap();
        assert_eq!(b.encode(), vec![7u16, 8].encode());
        assert_eq!(Bounded::<u16, 3>::max_encoded_len(), 1 + 3 * 2);
    }
}
