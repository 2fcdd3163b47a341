//! Sans-IO wire protocols: PMI-1/PMI-2 codecs and server core, the authenticated control channel.
