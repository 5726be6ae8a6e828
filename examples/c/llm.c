/* axrt_llm: greedy generation with a language model converted by
 * `python -m axrt.llm convert`, through the C API alone.
 *
 *   axrt_llm [--device ID] [--max-new-tokens N] MODEL.axe ID[,ID...]
 *
 * Prints the generated token ids, space-separated, on one line. The model's
 * configuration comes from the file's metadata (docs/llm.md): a KV cache of
 * just enough blocks for the prompt and the new tokens is allocated, the
 * prompt runs through `prefill` in chunks, then each new token through
 * `decode`, picking the most likely next token on the host. The `kv_cache`
 * input is mutable: both functions write it in place. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <axrt/axrt.h>

enum { kMaxPrompt = 4096, kDefaultNewTokens = 16 };

static bool fail(axrt_status_t status, const char* what) {
  if (status == NULL) return false;
  fprintf(stderr, "axrt_llm: %s failed: %s: %s\n", what,
          axrt_status_code_name(axrt_status_code(status)), axrt_status_message(status));
  axrt_status_free(status);
  return true;
}

/* The model's configuration, read from the JSON object in the metadata. */
typedef struct config_t {
  int64_t vocab_size, num_layers, num_kv_heads, head_dim, block_size, max_context, prefill_chunk;
} config_t;

/* The integer value of "key" at the top level of a flat JSON object; false
 * when absent. The configuration's keys are unique and its values for these
 * keys plain integers, so a search for "\"key\":" is exact. */
static bool json_int(const char* json, const char* key, int64_t* out) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char* at = strstr(json, pattern);
  if (at == NULL) return false;
  char* end = NULL;
  long long value = strtoll(at + strlen(pattern), &end, 10);
  if (end == at + strlen(pattern)) return false;
  *out = value;
  return true;
}

static bool read_config(axrt_executable_t executable, config_t* cfg) {
  const char* json = NULL;
  if (fail(axrt_executable_find_metadata(executable, "axrt.llm.config", &json, NULL),
           "axrt_executable_find_metadata")) {
    return false;
  }
  struct { const char* key; int64_t* value; } fields[] = {
      {"vocab_size", &cfg->vocab_size},     {"num_layers", &cfg->num_layers},
      {"num_kv_heads", &cfg->num_kv_heads}, {"head_dim", &cfg->head_dim},
      {"block_size", &cfg->block_size},     {"max_context", &cfg->max_context},
      {"prefill_chunk", &cfg->prefill_chunk},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    if (!json_int(json, fields[i].key, fields[i].value) || *fields[i].value < 1) {
      fprintf(stderr, "axrt_llm: the model's configuration has no positive '%s'\n",
              fields[i].key);
      return false;
    }
  }
  return true;
}

/* A tensor of `rank` extents on `device`, filled from `host` when not NULL. */
static axrt_status_t make_tensor(axrt_device_t device, axrt_stream_t stream, axrt_dtype_t dtype,
                                 uint32_t rank, const int64_t* shape, const void* host,
                                 axrt_tensor_t* out) {
  axrt_tensor_desc_t desc = AXRT_TENSOR_DESC_INIT;
  desc.dtype = dtype;
  desc.rank = rank;
  desc.shape = shape;
  axrt_status_t status = axrt_tensor_allocate(device, &desc, NULL, out);
  if (status != NULL || host == NULL) return status;
  uint64_t bytes = axrt_dtype_bit_width(dtype) / 8;
  for (uint32_t i = 0; i < rank; ++i) bytes *= (uint64_t)shape[i];
  axrt_buffer_t buffer = NULL;
  status = axrt_tensor_get_buffer(*out, &buffer);
  if (status == NULL) status = axrt_stream_copy_from_host(stream, host, buffer, 0, bytes);
  return status;
}

static bool parse_ids(const char* text, int32_t* ids, int* count) {
  *count = 0;
  const char* p = text;
  while (*p != '\0') {
    char* end = NULL;
    long value = strtol(p, &end, 10);
    if (end == p || value < 0 || value > INT32_MAX || *count == kMaxPrompt) return false;
    ids[(*count)++] = (int32_t)value;
    p = end;
    if (*p == ',') ++p;
    else if (*p != '\0') return false;
  }
  return *count > 0;
}

typedef struct run_t {
  axrt_device_t device;
  axrt_stream_t stream;
  axrt_function_t prefill, decode;
  axrt_tensor_t block_table, kv_cache;
  config_t cfg;
  float* logits; /* [vocab_size] on the host */
} run_t;

/* Runs `fn` on `count` tokens at `position`.. and leaves the logits of the
 * last one in run->logits. */
static bool step(run_t* run, axrt_function_t fn, const int32_t* tokens, int count,
                 int32_t position) {
  int32_t* positions = malloc(sizeof(int32_t) * (size_t)count);
  if (positions == NULL) return false;
  for (int i = 0; i < count; ++i) positions[i] = position + i;
  const int64_t n = count;
  axrt_tensor_t inputs[4] = {NULL, NULL, run->block_table, run->kv_cache};
  axrt_tensor_t logits = NULL;
  axrt_buffer_t buffer = NULL;
  bool ok = !fail(make_tensor(run->device, run->stream, AXRT_DTYPE_INT32, 1, &n, tokens,
                              &inputs[0]), "tokens") &&
            !fail(make_tensor(run->device, run->stream, AXRT_DTYPE_INT32, 1, &n, positions,
                              &inputs[1]), "positions") &&
            !fail(axrt_function_invoke(fn, run->stream, inputs, 4, &logits, 1, NULL),
                  "axrt_function_invoke") &&
            !fail(axrt_tensor_get_buffer(logits, &buffer), "axrt_tensor_get_buffer") &&
            !fail(axrt_stream_copy_to_host(run->stream, buffer, 0, run->logits,
                                           sizeof(float) * (uint64_t)run->cfg.vocab_size),
                  "axrt_stream_copy_to_host") &&
            !fail(axrt_stream_synchronize(run->stream), "axrt_stream_synchronize");
  axrt_tensor_release(logits);
  axrt_tensor_release(inputs[0]);
  axrt_tensor_release(inputs[1]);
  free(positions);
  return ok;
}

static int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return (int32_t)best;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: axrt_llm [--device ID] [--max-new-tokens N] MODEL.axe ID[,ID...]\n"
          "Greedy generation with a model converted by `python -m axrt.llm convert`;\n"
          "prints the generated token ids on one line.\n");
}

int main(int argc, char** argv) {
  const char* device_name = NULL;
  const char* args[2] = {NULL, NULL};
  int arg_count = 0;
  long new_tokens = kDefaultNewTokens;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device_name = argv[++i];
    } else if (strcmp(argv[i], "--max-new-tokens") == 0 && i + 1 < argc) {
      char* end = NULL;
      new_tokens = strtol(argv[++i], &end, 10);
      if (*end != '\0' || new_tokens < 1 || new_tokens > 1000000) {
        fprintf(stderr, "axrt_llm: --max-new-tokens takes a count in [1, 1000000], not '%s'\n",
                argv[i]);
        return 2;
      }
    } else if (argv[i][0] == '-' && argv[i][1] == '-') {
      fprintf(stderr, "axrt_llm: unknown option or missing value: '%s'\n", argv[i]);
      return 2;
    } else if (arg_count < 2) {
      args[arg_count++] = argv[i];
    } else {
      fprintf(stderr, "axrt_llm: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (arg_count != 2) {
    usage(stderr);
    return 2;
  }
  static int32_t prompt[kMaxPrompt];
  int prompt_count = 0;
  if (!parse_ids(args[1], prompt, &prompt_count)) {
    fprintf(stderr, "axrt_llm: the prompt must be 1 to %d token ids separated by commas, not "
            "'%s'\n", kMaxPrompt, args[1]);
    return 2;
  }

  int rc = 1;
  axrt_instance_t instance = NULL;
  axrt_executable_t executable = NULL;
  run_t run = {0};
  int32_t* table = NULL;
  if (fail(axrt_instance_create(NULL, &instance), "axrt_instance_create")) goto done;
  if (fail(axrt_instance_find_device(instance, device_name, &run.device),
           "axrt_instance_find_device")) {
    goto done;
  }
  if (fail(axrt_executable_load_file(run.device, args[0], NULL, &executable),
           "axrt_executable_load_file")) {
    goto done;
  }
  if (!read_config(executable, &run.cfg)) goto done;
  const config_t* cfg = &run.cfg;
  for (int i = 0; i < prompt_count; ++i) {
    if (prompt[i] >= cfg->vocab_size) {
      fprintf(stderr, "axrt_llm: token id %" PRId32 " is outside the vocabulary [0, %" PRId64
              ")\n", prompt[i], cfg->vocab_size);
      goto done;
    }
  }
  const int64_t total = prompt_count + new_tokens;
  if (total > cfg->max_context) {
    fprintf(stderr, "axrt_llm: %d prompt tokens + %ld new ones exceed the model's context of %"
            PRId64 "\n", prompt_count, new_tokens, cfg->max_context);
    goto done;
  }
  if (fail(axrt_executable_find_function(executable, "prefill", &run.prefill), "prefill") ||
      fail(axrt_executable_find_function(executable, "decode", &run.decode), "decode") ||
      fail(axrt_stream_create(run.device, NULL, &run.stream), "axrt_stream_create")) {
    goto done;
  }

  /* The KV cache: blocks 0..blocks-1 for this one sequence, in order. */
  const int64_t blocks = (total + cfg->block_size - 1) / cfg->block_size;
  const int64_t table_width = (cfg->max_context + cfg->block_size - 1) / cfg->block_size;
  table = calloc((size_t)table_width, sizeof(int32_t));
  run.logits = malloc(sizeof(float) * (size_t)cfg->vocab_size);
  if (table == NULL || run.logits == NULL) {
    fprintf(stderr, "axrt_llm: out of host memory\n");
    goto done;
  }
  for (int64_t b = 0; b < blocks; ++b) table[b] = (int32_t)b;
  const int64_t table_shape[2] = {1, table_width};
  const int64_t cache_shape[6] = {cfg->num_layers, 2, blocks, cfg->num_kv_heads,
                                  cfg->block_size, cfg->head_dim};
  if (fail(make_tensor(run.device, run.stream, AXRT_DTYPE_INT32, 2, table_shape, table,
                       &run.block_table), "block table") ||
      fail(make_tensor(run.device, run.stream, AXRT_DTYPE_FLOAT32, 6, cache_shape, NULL,
                       &run.kv_cache), "KV cache")) {
    goto done;
  }

  for (int start = 0; start < prompt_count; start += (int)cfg->prefill_chunk) {
    int count = prompt_count - start;
    if (count > cfg->prefill_chunk) count = (int)cfg->prefill_chunk;
    if (!step(&run, run.prefill, prompt + start, count, start)) goto done;
  }
  int32_t position = prompt_count;
  for (long i = 0; i < new_tokens; ++i) {
    int32_t token = argmax(run.logits, cfg->vocab_size);
    printf(i == 0 ? "%" PRId32 : " %" PRId32, token);
    if (i + 1 < new_tokens && !step(&run, run.decode, &token, 1, position++)) goto done;
  }
  printf("\n");
  rc = 0;

done:
  free(table);
  free(run.logits);
  axrt_tensor_release(run.block_table);
  axrt_tensor_release(run.kv_cache);
  axrt_stream_release(run.stream);
  axrt_function_release(run.prefill);
  axrt_function_release(run.decode);
  axrt_executable_release(executable);
  axrt_device_release(run.device);
  axrt_instance_release(instance);
  return rc;
}
