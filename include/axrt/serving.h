/* axrt serving engine: many generation requests over one language model,
 * scheduled step by step (continuous batching) over one paged KV cache.
 *
 * The engine drives an executable that follows the serving contract of
 * docs/serving.md (the files `axrt.llm convert` writes follow it):
 *   - `step(tokens i32[T], positions i32[T], block_tables i32[T, MB],
 *          logit_rows i32[S], kv_cache f32[L, 2, NB, KVH, BS, D] mutable)
 *        -> logits f32[S, V]`
 *     (the cache may also be bf16 [.., D], or u8 [.., D + 4]: fp8 e4m3 codes
 *     with a scale per row; its blocks are sized from its element type);
 *     appends any mix of tokens of any sequences to the cache (token t at
 *     `positions[t]` of the sequence whose block table is row t) and returns
 *     the logits after the tokens `logit_rows` names;
 *   - `sample(logits f32[S, V], temperature f32[S], top_k i32[S],
 *            top_p f32[S], seeds u64[S], positions i32[S]) -> tokens i32[S]`;
 *   - optionally `process_logits(logits f32[S, V] mutable, temperature f32[S],
 *            repetition_penalty f32[S], frequency_penalty f32[S],
 *            presence_penalty f32[S], min_p f32[S], entry_tokens i32[S, E],
 *            entry_counts i32[S, E], entry_in_prompt i32[S, E],
 *            entry_bias f32[S, E])`, which applies the requests' logit bias,
 *     penalties and min_p to the logits in place; the engine calls it
 *     between `step` and `sample` in the steps that need it. A file without
 *     it serves every request but those with such options.
 * The engine reads every size it needs (layers, heads, block size, the
 * longest sequence, the vocabulary, the most tokens and sequences a step
 * takes) from these signatures.
 *
 * Threading: the engine runs its steps on a thread of its own. Every
 * function here is thread-safe. The event callback is called on the
 * engine's thread, never while an engine lock is held, one event at a time;
 * it may call axrt_engine_add_request, axrt_engine_cancel and
 * axrt_engine_query_stats, but not axrt_engine_destroy. */
#ifndef AXRT_SERVING_H_
#define AXRT_SERVING_H_

#include "axrt/base.h"
#include "axrt/executable.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct axrt_engine_s* axrt_engine_t;

/* Why a request ended (axrt_engine_event_t.finish). */
typedef uint32_t axrt_finish_reason_t;
enum {
  AXRT_FINISH_NONE = 0,      /* not finished: more events follow */
  AXRT_FINISH_STOP = 1,      /* the event's token is one of the request's stop ids */
  AXRT_FINISH_LENGTH = 2,    /* max_tokens tokens were generated */
  AXRT_FINISH_CANCELLED = 3, /* axrt_engine_cancel, or the engine was destroyed */
  AXRT_FINISH_ERROR = 4,     /* the step failed (the device, or memory ran short);
                              * the event's status says how */
};

/* One event of one request: a generated token, its end, or both. */
typedef struct axrt_engine_event_t {
  size_t struct_size;
  uint64_t request_id;
  /* The generated token, or -1 when the event carries none (cancelled,
   * error). */
  int32_t token;
  /* The token's index among the request's generated tokens (0 first). */
  uint32_t index;
  axrt_finish_reason_t finish;
  /* Why, for AXRT_FINISH_ERROR; NULL otherwise. Borrowed for the call. */
  axrt_status_t status;
  /* With AXRT_REQUEST_FLAG_LOGITS: the `vocab_size` logits the token was
   * sampled from; NULL otherwise. Borrowed for the call. */
  const float* logits;
  uint32_t vocab_size;
  /* With AXRT_REQUEST_FLAG_LOGPROBS: the token's log-probability under the
   * model's distribution (log-softmax of the logits, before temperature),
   * and the `top_count` most likely tokens with theirs, most likely first
   * (borrowed for the call). 0 and NULL otherwise. */
  float logprob;
  uint32_t top_count;
  const int32_t* top_tokens;
  const float* top_logprobs;
  /* The prompt's length, and how many of its tokens the prefix cache
   * supplied (on the first event of a request's choice; 0 on later ones). */
  uint32_t prompt_tokens;
  uint32_t cached_tokens;
  /* Which of the request's choices (axrt_request_t.n) the event belongs to,
   * from 0. Each choice has its own events: its tokens with their indices,
   * its first event with prompt_tokens and cached_tokens, its last with
   * `finish`. Past the end of the struct as it was before the field: a
   * callback reads it only when struct_size covers it. */
  uint32_t choice;
} axrt_engine_event_t;

typedef void (*axrt_engine_callback_t)(void* user_data, const axrt_engine_event_t* event);

/* Engine behaviour (axrt_engine_options_t.flags). */
typedef uint32_t axrt_engine_flags_t;
enum {
  /* A prompt is prefilled in one step or not at all; off, a long prompt is
   * split over several steps under the step's token budget. */
  AXRT_ENGINE_FLAG_NO_CHUNKED_PREFILL = 1u << 0,
  /* No automatic prefix caching: blocks are never shared between requests. */
  AXRT_ENGINE_FLAG_NO_PREFIX_CACHING = 1u << 1,
};

typedef struct axrt_engine_options_t {
  size_t struct_size;
  const void* next;
  /* The KV cache: `num_blocks` blocks, or when 0 as many as
   * `kv_cache_bytes` holds, or when both are 0 enough for `max_running`
   * sequences of the longest length. */
  uint32_t num_blocks;
  uint64_t kv_cache_bytes;
  /* The most tokens one step runs (0: the step function's bound). */
  uint32_t max_step_tokens;
  /* The most sequences running at once (0: the step function's bound on
   * S). */
  uint32_t max_running;
  /* The most requests waiting; add_request refuses more with UNAVAILABLE
   * (0: no limit). */
  uint32_t max_waiting;
  axrt_engine_flags_t flags;
  /* Called with every event (see the threading note above); required. */
  axrt_engine_callback_t callback;
  void* user_data;
  /* A tensor-parallel set (docs/multi-device.md, "Serving a set"): the
   * members of `group` run `executables` (rank order, `executable_count`
   * the group's size, each loaded on its member's device, the channel of
   * their collectives bound to `group`); the create call's `executable` is
   * executables[0], the head rank, whose `step` returns the logits and whose
   * `sample` runs; the others' `step` take the same inputs and return
   * nothing. Every step runs on every member, on a stream of its own, with
   * the same tokens, positions and block tables; the scheduler and the
   * block manager run once, and each member holds its shard of the KV cache
   * (`num_blocks` blocks each; `kv_cache_bytes` is each member's). The group
   * is borrowed and must outlive the engine; a member that fails fails the
   * engine, every request in flight ending with an error naming it. NULL
   * and 0: one device. */
  axrt_group_t group;
  const axrt_executable_t* executables;
  size_t executable_count;
  /* Graphs (axrt_function_capture): a step of only decode tokens of at most
   * this many sequences is padded to the next batch-size bucket (1, 2, 4,
   * ..., up to this bound, itself a bucket) and replays the `step` and
   * `sample` graphs captured for that bucket at its first use: on a CUDA
   * device one launch each instead of one per kernel. Padding tokens write
   * their keys and values into blocks of their own, past the cache's
   * `num_blocks`, and their rows are never delivered; tokens are those of
   * the same steps without graphs, bit for bit (the kernels' results do not
   * depend on the batch). A step whose rows need `process_logits` calls it
   * (not captured) between the two replays. 0 (the default): every step is
   * a call. A set (`group`) runs its steps as calls. */
  uint32_t graph_max_batch;
} axrt_engine_options_t;

#define AXRT_ENGINE_OPTIONS_INIT \
  { sizeof(axrt_engine_options_t), NULL, 0, 0, 0, 0, 0, 0, NULL, NULL, NULL, NULL, 0, 0 }

/* Request behaviour (axrt_request_t.flags). */
typedef uint32_t axrt_request_flags_t;
enum {
  AXRT_REQUEST_FLAG_LOGITS = 1u << 0,   /* events carry the logits */
  AXRT_REQUEST_FLAG_LOGPROBS = 1u << 1, /* events carry log-probabilities */
};

/* The most alternatives a request may ask for (axrt_request_t.top_logprobs). */
#define AXRT_ENGINE_MAX_TOP_LOGPROBS 20
/* The most entries of a request's logit bias (axrt_request_t.logit_bias_count),
 * and the bound of each value (OpenAI's). */
#define AXRT_ENGINE_MAX_LOGIT_BIAS 300
#define AXRT_ENGINE_LOGIT_BIAS_BOUND 100.0f
/* The most choices a request may ask for (axrt_request_t.n). */
#define AXRT_ENGINE_MAX_CHOICES 128

typedef struct axrt_request_t {
  size_t struct_size;
  const void* next;
  /* The caller's name for the request, unique among its live requests. */
  uint64_t id;
  /* At least one token id, each in [0, vocabulary); copied. */
  const int32_t* prompt;
  size_t prompt_length;
  /* At least 1; prompt_length + max_tokens must fit the longest sequence. */
  uint32_t max_tokens;
  /* Generating one of these ends the request (the token is delivered);
   * copied. */
  const int32_t* stop_ids;
  size_t stop_id_count;
  /* Sampling: greedy when temperature is 0; else from softmax(logits /
   * temperature) over the top_k most likely tokens (0: all), then the
   * smallest set reaching probability top_p (in (0, 1]). The seed makes a
   * sampled request reproducible: its tokens depend on the seed, the
   * prompt and the options only, never on the other requests. */
  float temperature;
  int32_t top_k;
  float top_p;
  uint64_t seed;
  axrt_request_flags_t flags;
  /* With AXRT_REQUEST_FLAG_LOGPROBS: alternatives per token, at most
   * AXRT_ENGINE_MAX_TOP_LOGPROBS. */
  uint32_t top_logprobs;

  /* The fields below are past the end of the struct as it was first
   * released: a smaller struct_size gives them their defaults (those of
   * AXRT_REQUEST_INIT).
   *
   * Logits processing, with vLLM's definitions (docs/serving.md, "Sampling
   * options"), in this order on the logits of every token sampled:
   * `logit_bias_values[i]` is added to the logit of `logit_bias_tokens[i]`;
   * the logit `l` of every token of the prompt or of the tokens generated
   * so far becomes `l / repetition_penalty` when positive, else
   * `l * repetition_penalty`; then `frequency_penalty * count +
   * presence_penalty * (count > 0)` is subtracted, `count` the token's
   * occurrences among the tokens generated so far (not the prompt's). With
   * temperature > 0, after temperature, tokens whose probability is below
   * `min_p` times the largest are removed, then top_k and top_p apply.
   * Greedy takes the largest processed logit. The logits and
   * log-probabilities the events carry are those before processing. A model
   * file without `process_logits` refuses a request with any of these
   * options (INVALID_ARGUMENT naming it).
   *
   * Penalties: finite; repetition_penalty > 0 (1: none). */
  float presence_penalty;
  float frequency_penalty;
  float repetition_penalty;
  /* In [0, 1] (0: none). */
  float min_p;
  /* `logit_bias_count` distinct token ids in [0, vocabulary), each with a
   * value in [-AXRT_ENGINE_LOGIT_BIAS_BOUND, AXRT_ENGINE_LOGIT_BIAS_BOUND];
   * at most AXRT_ENGINE_MAX_LOGIT_BIAS entries; copied. */
  const int32_t* logit_bias_tokens;
  const float* logit_bias_values;
  size_t logit_bias_count;
  /* Choices: n sequences generated from the prompt, 1 to
   * AXRT_ENGINE_MAX_CHOICES. The prompt runs once: the other choices start
   * once choice 0 has prefilled it, taking its KV blocks from the prefix
   * cache (without prefix caching they compute it again). Choice 0 samples
   * with `seed`, so that it draws what a request with n = 1 draws; choice
   * c > 0 with `mix64(seed + c * 0x9E3779B97F4A7C15)` (modulo 2^64; mix64
   * SplitMix64's output function, docs/llm.md "Sampling"). Every choice has
   * its own events (axrt_engine_event_t.choice) and ends with its own last
   * event; the request is over, and its id free, once every choice has
   * ended. axrt_engine_cancel ends every choice. */
  uint32_t n;
} axrt_request_t;

#define AXRT_REQUEST_INIT                                                                   \
  { sizeof(axrt_request_t), NULL, 0, NULL, 0, 1, NULL, 0, 0.0f, 0, 1.0f, 0, 0, 0, 0.0f, 0.0f, \
    1.0f, 0.0f, NULL, NULL, 0, 1 }

typedef struct axrt_engine_stats_t {
  size_t struct_size;
  const void* next;
  uint32_t running;          /* sequences holding KV blocks */
  uint32_t waiting;          /* admitted requests not yet running (preempted ones too) */
  uint32_t kv_blocks_total;
  uint32_t kv_blocks_used;   /* held by a request */
  uint32_t kv_blocks_cached; /* free, still holding a reusable prefix */
  uint32_t block_size;       /* tokens per block */
  uint64_t kv_slots_used;    /* token slots of held blocks written, or being
                                written by the step in flight */
  uint64_t steps;
  uint64_t prompt_tokens;    /* of every request started */
  uint64_t cached_prompt_tokens; /* of those, supplied by the prefix cache */
  uint64_t computed_tokens;  /* tokens run through the model (recomputes too) */
  uint64_t generated_tokens;
  uint64_t preemptions;
  uint64_t requests_finished;  /* choices: a request of n choices counts n */
  uint64_t requests_cancelled;
  uint64_t requests_rejected; /* refused by add_request */
  /* 1 once a step failed on the device (in a set: on any member): the
   * engine ended every request in flight with the error and takes no more
   * requests (add_request's FAILED_PRECONDITION says why). */
  uint32_t failed;
  /* Of `steps`, those that replayed graphs (graph_max_batch), and the
   * graphs captured for them (two per bucket: `step` and `sample`). */
  uint64_t graph_steps;
  uint32_t graphs_captured;
} axrt_engine_stats_t;

#define AXRT_ENGINE_STATS_INIT \
  { sizeof(axrt_engine_stats_t), NULL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }

/* Creates an engine running `executable`'s `step` and `sample` functions
 * on its device, with a KV cache allocated there, and starts its thread.
 * INVALID_ARGUMENT names what the executable or the options lack;
 * RESOURCE_EXHAUSTED when the cache does not fit. `options` is read during
 * the call only; the engine retains the executable; the caller owns
 * `*out_engine` (axrt_engine_destroy), written on success only. */
AXRT_API axrt_status_t axrt_engine_create(axrt_executable_t executable,
                                          const axrt_engine_options_t* options,
                                          axrt_engine_t* out_engine);

/* Queues a request (first come, first served). `request` and the arrays it
 * points to are read during the call only (copied). Events follow through
 * the callback. Refused, with nothing queued: INVALID_ARGUMENT for a bad
 * request (naming the field), or one that can never fit (a prompt longer
 * than the longest sequence, or needing more blocks than the cache has);
 * ALREADY_EXISTS for an id in use; UNAVAILABLE when max_waiting requests
 * wait; FAILED_PRECONDITION when the engine has failed. */
AXRT_API axrt_status_t axrt_engine_add_request(axrt_engine_t engine, const axrt_request_t* request);

/* Ends request `id` (every choice of it): once this returns OK no further
 * token of it is delivered, the last event of each choice still running is
 * AXRT_FINISH_CANCELLED, and its blocks are freed before that event.
 * NOT_FOUND when no live request has that id (it may have just finished). */
AXRT_API axrt_status_t axrt_engine_cancel(axrt_engine_t engine, uint64_t id);

/* Writes a snapshot of the engine's counters into `*out_stats`, as far as
 * its struct_size goes (INVALID_ARGUMENT below the fields' start). */
AXRT_API axrt_status_t axrt_engine_query_stats(axrt_engine_t engine,
                                               axrt_engine_stats_t* out_stats);

/* Stops the engine: the step in flight completes, every live request ends
 * with AXRT_FINISH_CANCELLED (delivered before this returns), and the cache
 * and the engine's thread go away. NULL is a no-op. Must not be called from
 * the callback. Unlike the handles of axrt.h, an engine is not looked up in
 * the handle table: a destroyed engine must not be passed again. */
AXRT_API void axrt_engine_destroy(axrt_engine_t engine);

/* A tensor-parallel set across processes (docs/multi-device.md, "Serving
 * across processes"): the members of a group across processes
 * (axrt_group_join), one a process. The head (rank 0) creates the engine
 * with `group` set and its own executable only (`executables` of one, the
 * create call's `executable`); every other member calls
 * axrt_engine_follow() with its shard, loaded on the device it joined
 * with. The head sends each step's inputs (tokens, positions, block
 * tables, logit rows, copy-on-write copies) to the members through the
 * group; each runs its shard's `step` with them, the steps' collectives
 * meeting across the processes. Tokens are the bits the same set gives in
 * one process. */
typedef struct axrt_engine_follow_options_t {
  size_t struct_size;
  const void* next;
} axrt_engine_follow_options_t;

#define AXRT_ENGINE_FOLLOW_OPTIONS_INIT { sizeof(axrt_engine_follow_options_t), NULL }

/* Runs this process's member (rank 1 or more of `group`) of the set whose
 * head creates its engine over the same group: blocks, running every step
 * the head sends, until the head's engine is destroyed (OK) or the group
 * fails (its failure, naming the member lost; axrt_group_abort() from
 * another thread ends it so). Borrows `executable` (the member's shard),
 * `group` and `options` (may be NULL) for the call; returns OK once the
 * head ends the set. Thread-safe; one call per group at a time. */
AXRT_API axrt_status_t axrt_engine_follow(axrt_executable_t executable, axrt_group_t group,
                                          const axrt_engine_follow_options_t* options);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AXRT_SERVING_H_ */
