// The common header of every handle-backed object, and `Ref<T>`, the
// reference that keeps one alive inside the runtime.
#ifndef AXRT_RUNTIME_OBJECT_H_
#define AXRT_RUNTIME_OBJECT_H_

#include <atomic>
#include <cstdint>
#include <utility>

namespace axrt {

enum class ObjectType : uint32_t {
  kInstance = 1,
  kDevice = 2,
  kBuffer = 3,
  kStream = 4,
  kEvent = 5,
  kAxeBuilder = 6,
  kTensor = 7,
  kExecutable = 8,
  kFunction = 9,
  kGraph = 10,
};

const char* object_type_name(ObjectType type) noexcept;

struct Object {
  std::atomic<uint32_t> ref_count{1};
  ObjectType type;
  // The encoded handle the C API hands out; 0 until registered.
  uint64_t handle = 0;
  // When set, references to this object are references to `owner` (devices
  // live exactly as long as their instance).
  Object* owner = nullptr;
  // Frees the object; called once when the last reference goes.
  void (*destroy)(Object* self) = nullptr;

  explicit Object(ObjectType t) : type(t) {}
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;
};

void object_retain(Object* object) noexcept;
void object_release(Object* object) noexcept;

// Registers `object` in the handle table; its handle is then `object->handle`.
// Throws std::bad_alloc when the table cannot grow.
void object_register(Object* object);

// An owning reference. Adopts on construction from a raw pointer only through
// `Ref<T>::adopt`; copies retain.
template <typename T>
class Ref {
 public:
  Ref() = default;
  Ref(std::nullptr_t) {}
  // Retains `object`.
  explicit Ref(T* object) : object_(object) {
    if (object_) object_retain(object_);
  }
  static Ref adopt(T* object) {
    Ref ref;
    ref.object_ = object;
    return ref;
  }
  Ref(const Ref& other) : Ref(other.object_) {}
  Ref(Ref&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  template <typename U>
  Ref(Ref<U>&& other) noexcept : object_(other.release()) {}
  Ref& operator=(Ref other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  ~Ref() { reset(); }

  void reset() noexcept {
    if (object_) object_release(std::exchange(object_, nullptr));
  }
  // Gives up ownership without releasing.
  T* release() noexcept { return std::exchange(object_, nullptr); }
  T* get() const noexcept { return object_; }
  T* operator->() const noexcept { return object_; }
  T& operator*() const noexcept { return *object_; }
  explicit operator bool() const noexcept { return object_ != nullptr; }

 private:
  T* object_ = nullptr;
};

}  // namespace axrt

#endif  // AXRT_RUNTIME_OBJECT_H_
