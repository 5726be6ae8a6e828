/* axrt_llm: greedy generation with a language model converted by
 * `python -m axrt.llm convert`, through the C API alone.
 *
 *   axrt_llm [--device ID] [--max-new-tokens N] MODEL.axe ID[,ID...]
 *
 * Prints the generated token ids, space-separated, on one line. The model
 * runs in the serving engine (axrt/serving.h), as every way of running a
 * converted model does: the engine reads the model's sizes from its `step`
 * and `sample` functions, holds the paged KV cache, and runs the prompt and
 * each new token through `step`, sampling on the device. This program
 * submits one greedy request and waits for its events, which the engine
 * delivers on its own thread. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <pthread.h>
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

/* What the engine's thread hands to the main thread: the request's tokens,
 * then its end. */
typedef struct result_t {
  pthread_mutex_t mutex;
  pthread_cond_t ended;
  int32_t* tokens;
  long count;
  bool done;
  bool error;
} result_t;

/* Called on the engine's thread, once per event. */
static void on_event(void* user_data, const axrt_engine_event_t* event) {
  result_t* r = user_data;
  pthread_mutex_lock(&r->mutex);
  if (event->token >= 0) r->tokens[r->count++] = event->token;
  if (event->finish != AXRT_FINISH_NONE) {
    if (event->finish == AXRT_FINISH_ERROR) {
      fprintf(stderr, "axrt_llm: the request failed: %s\n",
              event->status != NULL ? axrt_status_message(event->status) : "(no status)");
      r->error = true;
    } else if (event->finish == AXRT_FINISH_CANCELLED) {
      r->error = true;
    }
    r->done = true;
    pthread_cond_signal(&r->ended);
  }
  pthread_mutex_unlock(&r->mutex);
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
  axrt_device_t device = NULL;
  axrt_executable_t executable = NULL;
  axrt_engine_t engine = NULL;
  result_t result = {.tokens = malloc(sizeof(int32_t) * (size_t)new_tokens)};
  pthread_mutex_init(&result.mutex, NULL);
  pthread_cond_init(&result.ended, NULL);
  if (result.tokens == NULL) {
    fprintf(stderr, "axrt_llm: out of host memory\n");
    goto done;
  }
  if (fail(axrt_instance_create(NULL, &instance), "axrt_instance_create") ||
      fail(axrt_instance_find_device(instance, device_name, &device),
           "axrt_instance_find_device") ||
      fail(axrt_executable_load_file(device, args[0], NULL, &executable),
           "axrt_executable_load_file")) {
    goto done;
  }

  /* One request at a time needs one sequence's KV cache: max_running 1
   * sizes the cache for one sequence of the longest length. */
  axrt_engine_options_t options = AXRT_ENGINE_OPTIONS_INIT;
  options.max_running = 1;
  options.callback = on_event;
  options.user_data = &result;
  if (fail(axrt_engine_create(executable, &options, &engine), "axrt_engine_create")) goto done;

  /* Greedy (temperature 0), no stop ids: exactly max_tokens tokens. The
   * engine checks the prompt (ids in the vocabulary, within the context). */
  axrt_request_t request = AXRT_REQUEST_INIT;
  request.id = 1;
  request.prompt = prompt;
  request.prompt_length = (size_t)prompt_count;
  request.max_tokens = (uint32_t)new_tokens;
  if (fail(axrt_engine_add_request(engine, &request), "axrt_engine_add_request")) goto done;

  pthread_mutex_lock(&result.mutex);
  while (!result.done) pthread_cond_wait(&result.ended, &result.mutex);
  pthread_mutex_unlock(&result.mutex);
  if (result.error) goto done;
  for (long i = 0; i < result.count; ++i) {
    printf(i == 0 ? "%" PRId32 : " %" PRId32, result.tokens[i]);
  }
  printf("\n");
  rc = 0;

done:
  axrt_engine_destroy(engine);
  axrt_executable_release(executable);
  axrt_device_release(device);
  axrt_instance_release(instance);
  pthread_cond_destroy(&result.ended);
  pthread_mutex_destroy(&result.mutex);
  free(result.tokens);
  return rc;
}
