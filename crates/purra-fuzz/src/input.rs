//! A cursor over a fuzz input: structure (sizes, choices) from its first bytes, data from the rest.

/// Reads bytes off the front of an input; an exhausted input reads as zeros.
pub(crate) struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Input { data }
    }

    /// The next byte, or 0.
    pub(crate) fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next two bytes as a little-endian number.
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from(self.byte()) | (u16::from(self.byte()) << 8)
    }

    /// The next `n` bytes (fewer at the end).
    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// Everything left.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.data
    }

    /// Nothing left.
    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Chunk sizes (1 to 16 bytes) from `spec`, cycled; one chunk of everything when `spec` is empty.
pub(crate) fn chunks<'a>(spec: &'a [u8], data: &'a [u8]) -> Vec<&'a [u8]> {
    if spec.is_empty() {
        return vec![data];
    }
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = (1 + usize::from(spec[i % spec.len()] % 16)).min(rest.len());
        let (head, tail) = rest.split_at(n);
        out.push(head);
        rest = tail;
        i += 1;
    }
    out
}
