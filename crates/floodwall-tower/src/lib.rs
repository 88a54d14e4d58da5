//! floodwall's tower integration (in progress).
