// Types of the Switchboard JavaScript client, for editors and TypeScript.
// The modules are plain JavaScript; this file describes them.

// ---- bincode.js ----

/** Encodes and decodes one type: the unit every schema is built from. */
export interface Schema<T> {
  write(w: Writer, value: T): void;
  read(r: Reader): T;
}

export class DecodeError extends Error {}

export class Writer {
  constructor(capacity?: number);
  len: number;
  u8(v: number): void;
  raw(bytes: ArrayLike<number>): void;
  varint(v: number | bigint): void;
  f32(v: number): void;
  f64(v: number): void;
  bytes(): Uint8Array;
}

export class Reader {
  constructor(bytes: Uint8Array);
  pos: number;
  u8(): number;
  raw(n: number): Uint8Array;
  varint(bits?: number): number | bigint;
  f32(): number;
  f64(): number;
  done(): boolean;
}

export function encode<T>(schema: Schema<T>, value: T): Uint8Array;
export function decode<T>(schema: Schema<T>, bytes: Uint8Array): T;

export const u8: Schema<number>;
export const i8: Schema<number>;
export const u16: Schema<number>;
export const u32: Schema<number>;
/** A number up to 2^53 - 1, a BigInt beyond. */
export const u64: Schema<number | bigint>;
export const i16: Schema<number>;
export const i32: Schema<number>;
export const i64: Schema<number | bigint>;
export const bool: Schema<boolean>;
export const f32: Schema<number>;
export const f64: Schema<number>;
export const unit: Schema<null>;
export const bytes: Schema<Uint8Array>;
export const string: Schema<string>;
/** A UUID in its text form (a `ClientId`). */
export const uuid: Schema<string>;
export function fixedBytes(n: number): Schema<Uint8Array>;
export function option<T>(inner: Schema<T>): Schema<T | null>;
export function vec<T>(inner: Schema<T>, limit?: number): Schema<T[]>;
export function array<T>(inner: Schema<T>, n: number): Schema<T[]>;
export function tuple(...items: Schema<any>[]): Schema<any[]>;
export function map<V>(key: Schema<string>, value: Schema<V>): Schema<Record<string, V>>;
export function map<K, V>(key: Schema<K>, value: Schema<V>): Schema<Map<K, V>>;
export function struct<T extends Record<string, unknown>>(fields: { [K in keyof T]: Schema<T[K]> }): Schema<T>;
export function newtype<T>(inner: Schema<T>): Schema<T>;
/** Unit variants as their name; others as `{ [name]: value }`. */
export function enumOf(variants: (string | [string, Schema<any> | null])[]): Schema<string | Record<string, any>>;

// ---- frame.js ----

export const HEADER_LEN: 5;
export const FLAG_COMPRESSED: 1;
export interface Limits {
  maxFrameLen: number;
  maxDecompressedLen: number;
}
export const DEFAULT_LIMITS: Readonly<Limits>;
export class FrameError extends Error {}
export function encodeFrame(payload: Uint8Array): Uint8Array;
export function encodeFrameCompressed(payload: Uint8Array, threshold?: number): Promise<Uint8Array>;
export function splitFrame(frame: Uint8Array, limits?: Limits): { compressed: boolean; body: Uint8Array };
export function decodeFrame(frame: Uint8Array, limits?: Limits): Promise<Uint8Array>;
export function inflate(body: Uint8Array, max: number): Promise<Uint8Array>;
export interface Envelope {
  channel: number;
  action: number;
  /** The content's bytes: decode them with a schema. */
  content: Uint8Array;
}
export function decodeEnvelope(payload: Uint8Array): Envelope;
export function encodeEnvelope<T>(channel: number, action: number, schema: Schema<T>, value: T): Uint8Array;
export function encodeMessage<T>(channel: number, action: number, schema: Schema<T>, value: T): Uint8Array;

// ---- socket.js ----

export const PROTOCOL_VERSION: 1;
export const SYSTEM: Readonly<{ channel: 0; ping: 1; pong: 2; close: 3 }>;
export const CloseCode: Readonly<{
  NORMAL: 1000;
  GOING_AWAY: 1001;
  PROTOCOL_ERROR: 1002;
  VERSION_MISMATCH: 1003;
  ABUSE: 1007;
  SLOW_CONSUMER: 1008;
  REFUSED: 1010;
  TIMEOUT: 1011;
  REPLACED: 1012;
  SERVER_FULL: 1013;
  KICKED: 4000;
}>;

/** How a connection ended: `lost` (code null) when no close frame came. */
export interface Close {
  code: number | null;
  reason: string;
  byPeer: boolean;
  lost?: boolean;
}

export class Emitter {
  /** Connects `slot`; returns the function that disconnects it. */
  on(event: string, slot: (value: any) => void): () => void;
  once(event: string): Promise<any>;
  emit(event: string, value?: unknown): void;
}

export interface SocketOptions {
  WebSocket?: typeof WebSocket;
  /** Node only: `tcpTransport()` of `switchboard-client/node`, for `tcp://` and `tls://` addresses. */
  transport?: new (url: string, limits: Limits) => unknown;
  keepaliveMs?: number;
  idleTimeoutMs?: number;
  handshakeTimeoutMs?: number;
  limits?: Limits;
  /** The server's WebTransport (`webTransportOffer()`), tried before the WebSocket `url`. */
  webtransport?: WebTransportOffer | null;
  /** Application channels (16 and up) sent as datagrams over WebTransport; 4 and 5 always. */
  sequencedChannels?: number[];
}

/** How a page reaches its server's WebTransport. */
export interface WebTransportOffer {
  /** `https://host:port/` of the QUIC port. */
  url: string;
  /** SHA-256 hashes (hex) of the certificates to trust. */
  hashes?: string[];
  /** Give up opening after this long, in ms (3000), and use WebSocket. */
  openTimeoutMs?: number;
}

/** `GET /webtransport` on the page's server: null without WebTransport (browser or server). */
export function webTransportOffer(base?: string | URL): Promise<WebTransportOffer | null>;

/** The relay's moves and view channels: datagrams wherever the transport has them. */
export const DATAGRAM_CHANNELS: readonly number[];

export interface DatagramStats {
  sent: number;
  sentOnStream: number;
  delivered: number;
  stale: number;
  refused: number;
}

export class SwitchboardSocket extends Emitter {
  constructor(url: string | null, options?: SocketOptions);
  state: 'connecting' | 'open' | 'closing' | 'closed';
  /** What carries the connection. */
  readonly transport: 'webtransport' | 'websocket' | 'tcp';
  /** What the connection's datagrams did (WebTransport). */
  datagramStats: DatagramStats;
  /** The last measured round trip, in milliseconds. */
  rttMs: number | null;
  on(event: 'open', slot: () => void): () => void;
  on(event: 'message', slot: (message: Envelope) => void): () => void;
  on(event: 'error', slot: (error: Error) => void): () => void;
  on(event: 'close', slot: (close: Close) => void): () => void;
  send<T>(channel: number, action: number, schema: Schema<T>, value: T): void;
  sendFrame(frame: Uint8Array): void;
  close(reason?: string, code?: number): void;
  /** Drops the connection without a goodbye (for tests). */
  drop(): void;
}

// ---- session.js ----

export const SESSION_CHANNEL: 1;
export interface Resume {
  client: string;
  token: Uint8Array;
}
export interface Welcome {
  client: string;
  token: Uint8Array;
  resumed: boolean;
  grace_secs: number;
}
export interface Refused {
  code: number;
  reason: string;
}
export class RequestRejected extends Error {
  reason: string;
}
export class RequestFailed extends Error {
  code: string;
  detail: string;
}

/**
 * The retry-after a close reason ends with (`"... (retry after 500 ms)"`),
 * in milliseconds, or null. A first join closed with 1013 and one waits
 * that long and tries again.
 */
export function retryAfterMs(reason: string | undefined): number | null;

export interface SessionOptions {
  name: string;
  password?: string;
  credentials?: Uint8Array;
  resume?: Resume;
  reconnect?: boolean;
  maxAttempts?: number;
  /** A request's whole wait for its verdict, through a reconnect too (30000). */
  requestTimeoutMs?: number;
  /** Other servers of the same service (sessions shared through Redis). */
  fallbackUrls?: string[];
  socket?: SocketOptions;
}

export class SessionClient extends Emitter {
  constructor(url: string, options: SessionOptions);
  /** This client's id once welcomed (kept across reconnects). */
  client: string | null;
  socket: SwitchboardSocket;
  connect(): Promise<Welcome>;
  /** Replaces the fallback URLs; the next attempts go round them. */
  setFallbackUrls(urls: string[]): void;
  on(event: 'welcome', slot: (welcome: Welcome) => void): () => void;
  on(event: 'refused', slot: (refused: Refused) => void): () => void;
  on(event: 'reconnecting', slot: (attempt: { attempt: number; delayMs: number; close: Close }) => void): () => void;
  on(event: 'disconnected', slot: (close: Close) => void): () => void;
  on(event: 'message', slot: (message: Envelope) => void): () => void;
  on(event: 'error', slot: (error: Error) => void): () => void;
  request<T>(channel: number, action: number, schema: Schema<T>, value: T): Promise<void>;
  send<T>(channel: number, action: number, schema: Schema<T>, value: T): void;
  subscribe<T>(channel: number, action: number, schema: Schema<T>, slot: (value: T) => void): () => void;
  close(reason?: string): void;
}

// ---- rooms.js ----

export const ROOMS_CHANNEL: 2;
export type RpcTarget = 'All' | 'Others' | 'Host' | { One: string };
export interface RoomPlayer {
  id: string;
  name: string;
  host: boolean;
  ready: boolean;
  connected: boolean;
  latency_ms: number;
}
export interface Entity {
  id: number;
  owner: string;
  kind: string;
  state: Uint8Array;
}
export interface RoomState {
  id: number;
  name: string;
  max_players: number;
  metadata: Record<string, string>;
  locked: boolean;
  started: boolean;
  players: RoomPlayer[];
  entities: Entity[];
  more_entities: number;
}
export interface RoomSummary {
  id: number;
  name: string;
  players: number;
  max_players: number;
  metadata: Record<string, string>;
  locked: boolean;
  started: boolean;
}
/** The room as a RoomClient keeps it: players and entities by id. */
export interface RoomView extends Omit<RoomState, 'players' | 'entities'> {
  players: Map<string, RoomPlayer>;
  entities: Map<number, Entity>;
}

export class RoomClient extends Emitter {
  constructor(session: SessionClient);
  session: SessionClient;
  room: RoomView | null;
  create(room: { name: string; max_players?: number; metadata?: Record<string, string>; private?: boolean }): Promise<RoomState>;
  list(): Promise<RoomSummary[]>;
  join(id: number): Promise<RoomState>;
  leave(): Promise<void>;
  ready(ready?: boolean): Promise<void>;
  start(): Promise<void>;
  kick(player: string, reason: string): Promise<void>;
  lock(locked?: boolean): Promise<void>;
  rpc(method: string, target: RpcTarget, args?: Uint8Array): Promise<void>;
  custom(channel: string, data: Uint8Array): Promise<void>;
  spawn(kind: string, state: Uint8Array): Promise<Entity>;
  despawn(id: number): Promise<void>;
  update(id: number, state: Uint8Array): Promise<void>;
  transfer(id: number, owner: string): Promise<void>;
}

// ---- relay.js ----

export const RELAY_CHANNEL: 3;
/** Your own transforms, as datagrams over WebTransport. */
export const RELAY_MOVES_CHANNEL: 4;
/** Others' transforms, as datagrams over WebTransport. */
export const RELAY_VIEW_CHANNEL: 5;
export interface MovementState {
  moving: boolean;
  sprinting: boolean;
  sneaking: boolean;
  jumping: boolean;
  weapon_drawn: boolean;
  speed: number;
}
export interface Transform {
  position: [number, number, number];
  rotation: [number, number, number];
  zone: string;
  state: MovementState | null;
  extra: Record<string, string>;
}
export interface Relayed {
  player_id: number;
  server_time_ms: number;
  transform: Transform;
}

export class RelayClient extends Emitter {
  /**
   * `compact`: ask the relay for compact transforms (the same events, a few bytes each).
   * `datagrams`: transforms as datagrams both ways (default: over WebTransport, unless `compact`).
   */
  constructor(url: string, options?: { name?: string; bot?: boolean; compact?: boolean; datagrams?: boolean; socket?: SocketOptions });
  /** Whether transforms travel on the datagram channels (4 and 5). */
  readonly datagrams: boolean;
  id: number | null;
  /** The last transform of everyone in your zone, by player id. */
  players: Map<number, Relayed>;
  /** Resolves with this player's id once welcomed. */
  ready: Promise<number>;
  socket: SwitchboardSocket;
  /** Whether the last welcome came after a handover to another relay. */
  handedOver: boolean;
  move(transform: Partial<Transform> & { position: [number, number, number] }): void;
  close(reason?: string): void;
}

export type CompactRecord =
  | { type: 'transform'; player_id: number; server_time_ms: number; transform: Transform; extra_changed: boolean }
  | { type: 'left'; player_id: number }
  | { type: 'message'; action: number; content: Uint8Array };

/** Reads a relay's `Compact` frames (one decoder per connection, frames in order). */
export class CompactDecoder {
  constructor();
  /** The relay's precision of positions, once it said. */
  precision: number | null;
  /** One frame's content; throws `DecodeError` on bytes it cannot follow. */
  read(content: Uint8Array): { tick: number; server_time_ms: number; records: CompactRecord[] };
}

/** How many datagrams back a compact view record's baseline may be. */
export const VIEW_WINDOW: number;
/** A `ViewAck`'s content: the newest compact view datagram read and a mask of the 32 before it. */
export const ViewAck: Schema<{ newest: number; mask: number }>;

/** Compact view datagrams (over WebTransport with `compact`): each read alone, against acknowledged states. */
export class ViewDecoder {
  constructor();
  /** Records whose baseline was not held (a relay's fault): skipped. */
  unresolved: number;
  /** The datagrams read whole so far, as the next acknowledgement says them. */
  acked: { newest: number; mask: number };
  /** One `CompactView`; null if older than one already read; throws `DecodeError` on bytes that are not a relay's. */
  read(content: Uint8Array): {
    frame: number;
    tick: number;
    server_time_ms: number;
    records: { player_id: number; server_time_ms: number; transform: Transform; extra_changed: boolean }[];
  } | null;
  /** What to acknowledge, if anything was read since the last time. */
  ack(): { newest: number; mask: number } | null;
}

// ---- the protocol's schemas, for sending and decoding by hand ----

export const SessionAction: Readonly<Record<'hello' | 'welcome' | 'refused' | 'request' | 'accepted' | 'rejected' | 'error', number>>;
export const Hello: Schema<{ name: string; password: string | null; credentials: Uint8Array; resume: Resume | null }>;
export const Welcome: Schema<Welcome>;
export const Refused: Schema<Refused>;
export const RequestFrame: Schema<{ id: number | bigint; channel: number; action: number; content: Uint8Array }>;
export const Rejected: Schema<{ id: number | bigint; reason: string }>;
export const ErrorCode: Schema<string | Record<string, any>>;
export const ErrorReply: Schema<{ id: number | bigint; code: string; detail: string }>;
export const RoomAction: Readonly<Record<string, number>>;
export const RoomId: Schema<number>;
export const EntityId: Schema<number>;
export const CreateRoom: Schema<{ name: string; max_players: number; metadata: Record<string, string>; private: boolean }>;
export const Kick: Schema<{ player: string; reason: string }>;
export const RpcRequest: Schema<{ method: string; target: RpcTarget; args: Uint8Array }>;
export const RpcCall: Schema<{ from: string; method: string; args: Uint8Array }>;
export const CustomRequest: Schema<{ channel: string; data: Uint8Array }>;
export const CustomMessage: Schema<{ from: string; channel: string; data: Uint8Array }>;
export const SpawnRequest: Schema<{ kind: string; state: Uint8Array }>;
export const EntityUpdate: Schema<{ id: number; state: Uint8Array }>;
export const StateSync: Schema<{ server_time_ms: number; updates: { id: number; state: Uint8Array }[] }>;
export const Transfer: Schema<{ id: number; owner: string }>;
export const RoomPlayer: Schema<RoomPlayer>;
export const PlayerLeft: Schema<{ id: string; reason: string }>;
export const Entity: Schema<Entity>;
export const RoomState: Schema<RoomState>;
export const RoomSummary: Schema<RoomSummary>;
export const RelayAction: Readonly<Record<'hello' | 'transform' | 'welcome' | 'relayed' | 'left' | 'error' | 'notice' | 'redirect' | 'handover' | 'options' | 'batch' | 'compact' | 'compactView' | 'viewAck', number>>;
export const RelayHello: Schema<{ name: string; bot: boolean }>;
export const RelayOptions: Schema<{ batch: boolean; compact: boolean; datagrams: boolean; webtransport_redirects: boolean; compact_datagrams: boolean }>;
export const Batch: Schema<{ tick: number; server_time_ms: number; messages: [number, Uint8Array][] }>;
/** A relay's redirect, with the other relay's QUIC address when sent to a player on QUIC or WebTransport. */
export function readRedirect(bytes: Uint8Array): {
  addr: string;
  websocket: string | null;
  ticket: unknown;
  quic: string | null;
  /** The other relay's WebTransport certificate hashes (hex), to a WebTransport player only. */
  webtransport: string[] | null;
};
export const MovementState: Schema<MovementState>;
export const Transform: Schema<Transform>;
export const Relayed: Schema<Relayed>;

// ---- smoothing.js ----

export function lerp(a: number, b: number, t: number): number;
export function lerpVec(a: number[], b: number[], t: number): number[];
export function lerpDegrees(a: number, b: number, t: number): number;
export function lerpPose<T extends { position: number[]; rotation: number[] }>(a: T, b: T, t: number): T;

export interface SmoothingConfig {
  bufferIntervals: number;
  windowMs: number;
  maxExtrapolationMs: number;
  catchUp: number;
  snapAfterMs: number;
  capacity: number;
}
export const DEFAULT_SMOOTHING: Readonly<SmoothingConfig>;

export interface Sample<T> {
  value: T;
  kind: 'interpolated' | 'extrapolated' | 'held';
  serverMs: number;
  delayMs: number;
}

export class SnapshotBuffer<T> {
  constructor(blend: (a: T, b: T, t: number) => T, config?: Partial<SmoothingConfig>);
  stats: { frames: number; interpolated: number; extrapolated: number; held: number; snaps: number };
  push(serverMs: number, nowMs: number, value: T): void;
  targetDelayMs(): number;
  sample(nowMs: number): Sample<T> | null;
}

export class Link<T> {
  constructor(options?: { latencyMs?: number; jitterMs?: number; bandwidth?: number; stallEveryMs?: number; stallMs?: number; seed?: number });
  send(nowMs: number, item: T, bytes?: number): void;
  poll(nowMs: number): T[];
}

export class Predictor<S, I> {
  constructor(state: S, step: (state: S, input: I) => S, blend: (a: S, b: S, t: number) => S, options?: { correctionMs?: number; maxHistory?: number });
  predicted: S;
  corrections: number;
  input(input: I): number;
  reconcile(acked: { state: S; last_input: number }): void;
  advance(elapsedMs: number): void;
  drawn(): S;
}
