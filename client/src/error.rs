//! What can go wrong talking to the chain, sorted by what the caller should do about it.

/// A chain client failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node could not be reached, or the connection dropped (the node is restarting, the
    /// network is down): retry with backoff.
    #[error("node unreachable: {0}")]
    Unreachable(String),
    /// The runtime refused the call: the pallet's error and its documentation, which says why.
    #[error("{pallet}.{error}: {docs}")]
    Rejected {
        /// The pallet.
        pallet: String,
        /// The error's name.
        error: String,
        /// The error's doc comment.
        docs: String,
    },
    /// The transaction pool refused or dropped the transaction (stale nonce, a competing
    /// transaction, not valid at the current state): look at the chain again before retrying.
    #[error("transaction not included: {0}")]
    NotIncluded(String),
    /// The node runs a runtime this client was not generated for: nothing it sends can be trusted
    /// to mean what it meant. Fatal: update the client.
    #[error(
        "the node's runtime is not the one this client was generated for ({0}): rebuild the client \
         against the node's runtime"
    )]
    Incompatible(String),
    /// The key file is missing, unreadable or not a key.
    #[error("key: {0}")]
    Key(String),
    /// Anything else the client library reported (decoding, unexpected replies).
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// Whether trying the same thing again later may succeed without anything else changing.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unreachable(_) | Error::NotIncluded(_))
    }

    /// Whether the process cannot go on (retrying cannot help).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::Incompatible(_) | Error::Key(_))
    }

    /// The runtime error's name, if the runtime refused the call.
    pub fn rejected_as(&self) -> Option<&str> {
        match self {
            Error::Rejected { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// Sorts a subxt error: transport failures are retryable, codegen mismatches fatal. subxt nests its
/// errors several levels deep without exposing the transport cause, so the sorting reads the
/// message, which names the layer ("RPC error", "Backend error").
impl From<subxt::Error> for Error {
    fn from(e: subxt::Error) -> Self {
        let text = e.to_string();
        let lower = text.to_ascii_lowercase();
        if e.is_disconnected_will_reconnect()
            || e.is_rpc_limit_reached()
            || ["rpc error", "backend error", "connection", "disconnected", "restart"]
                .iter()
                .any(|m| lower.contains(m))
        {
            return Error::Unreachable(text);
        }
        if lower.contains("incompatible") {
            return Error::Incompatible(text);
        }
        Error::Other(text)
    }
}

macro_rules! from_subxt {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                subxt::Error::from(e).into()
            }
        }
    )*};
}

from_subxt!(
    subxt::error::OnlineClientError,
    subxt::error::OnlineClientAtBlockError,
    subxt::error::StorageError,
    subxt::error::StorageValueError,
    subxt::error::RuntimeApiError,
    subxt::error::EventsError,
    subxt::error::ExtrinsicError,
    subxt::error::ConstantError,
    subxt::error::BackendError,
    subxt::error::BlocksError,
    subxt::error::TransactionProgressError,
    subxt::rpcs::Error
);

/// A `Result` with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
