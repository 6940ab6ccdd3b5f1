// A JavaScript player for the Python client's tests: joins room ROOM on the
// rooms server's WebSocket URL, greets everyone with an RPC, and prints each
// RPC it gets as `rpc FROM METHOD TEXT`, until its stdin closes.
//
//   node --experimental-websocket js_guest.mjs ws://127.0.0.1:7101/ 1 jsy

import { decode, encode, string } from '../../js/src/bincode.js';
import { SessionClient } from '../../js/src/session.js';
import { RoomClient } from '../../js/src/rooms.js';

const [url, room, name] = process.argv.slice(2);
const session = new SessionClient(url, { name });
await session.connect();
const rooms = new RoomClient(session);
rooms.on('rpc', (call) => console.log(`rpc ${call.from} ${call.method} ${decode(string, call.args)}`));
await rooms.join(Number(room));
console.log(`joined ${room}`);
await rooms.rpc('greet', 'All', encode(string, `hello from ${name}`));
process.stdin.resume();
process.stdin.on('end', () => {
  session.close('done');
  setTimeout(() => process.exit(0), 100);
});
