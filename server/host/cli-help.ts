// The text of `tito-server serve --help` (docs/operations.md quotes it verbatim; its flags
// are parsed in cli.ts, whose FLAGS table test/server/http-doc.test.ts holds to this text).
export const HELP = `Usage: tito-server serve [options]

Runs the TITO session server: one HTTP router and N worker processes under supervision.

Options:
  --host ADDR                  listen address (default 127.0.0.1)
  --port N                     listen port, 0 = pick a free one (default 8080)
  --workers N                  worker processes / shards (default: the available CPU
                               cores, at most 8)
  --engine URL                 SGLang-compatible engine; when absent the built-in
                               simulated engine is started (and the log says so)
  --tokenizer DIR              Hugging Face tokenizer folder (default: bundled Qwen3)
  --tito-family NAME           the model family (docs/models.md): default, qwen3,
                               qwennext, qwen35, nemotron3, glm47, kimi25, kimi26,
                               minimax_m25, minimax_m27, deepseekv32, deepseekv4,
                               inkling, llama3, gemma3 (default: detected from the
                               tokenizer)
  --chat-template-kwargs JSON  passed to every chat-template render (default {})
  --allowed-append-roles LIST  comma list of roles a turn may append (default: the
                               family's, docs/models.md)
  --message-matcher MODE       strict | loose | role-content: how a turn's history is
                               matched against the session's (default strict;
                               docs/agents.md)
  --routing-replay             ask the engine for routed_experts (R3) payloads
  --indexer-replay             ask the engine for indexer_topk payloads
  --max-restarts N             restarts of one child within the window before the
                               tree fails; 0 = fail fast (default 3)
  --restart-window-ms N        sliding window for --max-restarts (default 60000)
  --events FILE                also append every supervision event to FILE (JSONL)
  --durability MODE            journal | memory: journal (default) keeps each shard's
                               sessions in an append-only journal that a restarted
                               worker replays; memory loses them with the worker
  --data-dir DIR               where shard journals live, kept (default: a fresh
                               directory under the OS temp dir, removed on shutdown)
  --fsync POLICY               every | interval | never: when journal writes reach
                               the disk (default interval, every 100 ms)
  --records-nice N             CPU priority (nice, 0-19) of the helper process per
                               worker that streams records GETs from the journal;
                               higher leaves more CPU to chat turns (default 10)
  --no-records-streamer        no such helper: workers write records GETs themselves
                               (about 45-60 MiB less memory per worker)
  --records-handoff-min-bytes N
                               records GETs of at least N bytes are written by their
                               worker on the client's socket itself; smaller ones are
                               relayed by the router (default 1048576; 0: every one)
  --engine-api API             sglang-chat (default): the chat route of an SGLang that
                               honours input_ids; sglang-generate: stock SGLang's
                               /generate; vllm-completions: stock vLLM's /v1/completions
  --engine-model NAME          the served model name sent to the engine (vllm-completions;
                               default: the first model of the engine's GET /v1/models)
  --generation-config on|off   on (default): the tokenizer folder's generation_config.json
                               fills in temperature/top_p/top_k a request leaves unset, on
                               every engine API; off: the engine's own defaults
  --cache-salt MODE            off | turn | session: the prefix-cache salt every engine
                               request carries once a weight version is set (SGLang
                               extra_key / cache_salt, vLLM cache_salt): the version the
                               session started under (session, default) or the turn's
                               (turn); off: none (docs/rl-loop.md)
  --engine-session-headers LIST  comma list of headers every engine request carries the
                               session's routing key in, for a gateway in front of several
                               engines (default X-SMG-Routing-Key,X-Session-ID; "": none)
  --on-engine-abort MODE       retry (default): a generation the engine aborts is a
                               retryable 503, nothing committed; resume: the turn keeps
                               its tokens and continues after the weight update, one
                               committed turn (docs/rl-loop.md, "Partial rollouts")
  --engine-timeout-ms N        per upstream request (default 600000)
  --engine-connect-timeout-ms N  a connection to the engine not up within N ms is a
                               502 "engine unreachable" (default 10000)
  --auth-token TOKEN           the admin token: require "Authorization: Bearer TOKEN"
                               on every route but /health (or env TITO_AUTH_TOKEN,
                               which keeps it out of ps); POST /sessions then also
                               returns a session token for agents (docs/security.md)
  --agent-proxy-allow LIST     comma list of engine paths a session token may GET
                               through its proxy (default /v1/models,/health,
                               /get_model_info)
  --body-limit BYTES           largest request body, 413 above (default 67108864)
  --shard-wait-ms N            how long a request waits for a restarting shard (default 10000)
  --hold-timeout-ms N          how long a chat turn waits at the door while the server
                               is paused for a weight update (POST /admin/pause) before a
                               503 with Retry-After (default 600000; docs/rl-loop.md)
  --session-idle-ttl-s N       delete sessions idle longer than N seconds, journalled
                               like a DELETE; later requests get 404 "session expired"
                               (default 0: never)
  --anthropic-ping-ms N        a streamed Anthropic Messages turn still at the engine
                               after N ms starts its events and sends a ping every N ms
                               until the engine answers (default 5000)
  --max-session-tokens N       a session's token budget (prompt plus completion) when
                               its create body gives none: a turn over it is a 400
                               TITO_ERR_BUDGET (default 0: none; docs/operations.md)
  --max-session-turns N        a session's turn budget when its create body gives none
                               (default 0: none)
  --trajectory MODE            linear | tree: a session's trajectory when its create
                               body gives none; tree keeps every attempt as a node
                               (default linear; docs/trajectories.md)
  --max-trajectory-nodes N     nodes a tree-mode session may hold; past it a turn is
                               a 409 TITO_ERR_TRAJECTORY_NODES (default 1024)
  --max-inflight-turns N       chat turns this instance sends on at once; more wait at
                               the router's door in arrival order (default 0: unlimited)
  --max-queued-turns M         turns that may wait at the door; beyond, a 429 with
                               Retry-After, TITO_ERR_OVERLOADED (default 0: unlimited)
  --sim-latency-ms N           simulated generation time of the built-in engine (default 0)
  --sim-token-ms N             simulated time per generated token of the built-in engine (default 0)
  --log-level LEVEL            pino level: fatal|error|warn|info|debug|trace|silent (default info)
  -h, --help                   show this help

Once ready it prints: tito-server ready url=http://HOST:PORT workers=N instance=<id>
`;
