"""The two-process engine: front end, ZMQ client, the engine-core process and the mirrored input cache."""
