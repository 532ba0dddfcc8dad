// The actors' one door to nact 7.6.2: the part of its API we use, typed as nact behaves.
// Its bundled typings leave out the `sender` every handler gets (a query's temporary
// reference, answered with dispatch), take a query only as a message factory, and allow
// what the actors never do (an async onCrash, spawnStateless: child-actor.ts says why). This file adds no
// behaviour: each function is nact's own, called the way the actors always called it.
import * as nact from "nact";
import type { ActorSystemRef, Ref } from "nact";

export { dispatch, start, stop } from "nact";
export type { ActorSystemRef, Ref };

/** What initialStateFunc gets (there is no sender there). */
export type ActorContext<Msg, ParentMsg> = nact.ActorContext<Msg, Ref<ParentMsg>>;

interface Sender {
  /** A query's temporary reference (dispatch the answer to it), or nact's Nobody. */
  readonly sender: Ref<unknown>;
}

/** What a handler gets with each message: also the sender, which nact passes but does not type. */
export type MessageContext<Msg, ParentMsg> = ActorContext<Msg, ParentMsg> & Sender;

/**
 * What onCrash gets. The actors answer with `reset`, `resetChild`, `stopChild` or `escalate`,
 * and `resume` only for a crash of their own (never for an escalation).
 */
export type SupervisionContext<Msg, ParentMsg> = nact.SupervisionContext<Msg, Ref<ParentMsg>> & Sender;

/** One of the symbols a supervision context offers; onCrash returns one. */
export type SupervisionDecision = SupervisionContext<unknown, unknown>["reset"];

export type ActorHandler<State, Msg, ParentMsg> = (
  state: State,
  msg: Msg,
  ctx: MessageContext<Msg, ParentMsg>,
) => State | Promise<State>;

export interface ActorProps<State, Msg, ParentMsg> {
  initialState?: State;
  /** Must never throw: record a failed start in the state and retry it by a message. */
  initialStateFunc?: (ctx: ActorContext<Msg, ParentMsg>) => State;
  /**
   * Synchronous and never throwing (a throw kills the process). `msg` is the message that
   * failed, the child's own when a child escalates (`child` is then set), so it is unknown.
   */
  onCrash?: (
    msg: unknown,
    err: unknown,
    ctx: SupervisionContext<Msg, ParentMsg>,
    child: Ref<unknown> | undefined,
  ) => SupervisionDecision;
  afterStop?: (state: State) => void;
}

/** nact's spawn (never spawnStateless: it ignores onCrash). */
export function spawn<State, Msg, ParentMsg>(
  parent: Ref<ParentMsg>,
  handler: ActorHandler<State, Msg, ParentMsg>,
  name: string,
  props: ActorProps<State, Msg, ParentMsg>,
): Ref<Msg> {
  // The casts only add the sender that nact's typings leave out of a context.
  return nact.spawn(
    parent,
    handler as nact.ActorFunc<State, Msg, Ref<ParentMsg>>,
    name,
    props as nact.ActorProps<State, Msg, Ref<ParentMsg>>,
  );
}

/**
 * Sends `msg` to `actor` with a temporary reference as its sender and resolves with the
 * first message dispatched to that reference. Rejects with nact's bare
 * `Error('Query Timeout')` after `timeoutMs` (callers turn it into a coded error), or at
 * once when the actor is gone.
 */
export function query<Msg>(actor: Ref<Msg>, msg: Msg, timeoutMs: number): Promise<unknown> {
  // nact calls a function it is given with the temporary reference, then dispatches what
  // it returns with that reference as the sender: the same as being given `msg` itself.
  return nact.query(actor, () => msg, timeoutMs);
}
