// The Switchboard JavaScript client: plain ES modules for browsers and node
// (docs/JAVASCRIPT.md). Everything is importable from here.

export * from './bincode.js';
export * from './frame.js';
export * from './socket.js';
export * from './webtransport.js';
export * from './session.js';
export * from './rooms.js';
export * from './relay.js';
export * from './compact.js';
export * from './smoothing.js';
