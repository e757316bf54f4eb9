// The unpickler behind read_torch_state_dict (see pickle_internal.h for its scope). It is a
// plain stack machine over the opcodes of pickle protocols 2-4 in binary form; text-mode
// opcodes (protocol 0/1) are not emitted by torch.save and are rejected.
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include <torch/torch.h>

#include "pickle_internal.h"
#include "shoplens/core/errors.h"
#include "shoplens/core/strings.h"

namespace shoplens::detail {
namespace {

using Kind = PickleValue::Kind;

PickleValuePtr make(Kind kind) {
  auto v = std::make_shared<PickleValue>();
  v->kind = kind;
  return v;
}

// The legacy typed storages torch.save names in its persistent ids.
at::ScalarType storage_dtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.DoubleStorage", at::kDouble},
      {"torch.FloatStorage", at::kFloat},
      {"torch.HalfStorage", at::kHalf},
      {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},
      {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},
      {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},
      {"torch.BoolStorage", at::kBool},
      {"torch.ComplexFloatStorage", at::kComplexFloat},
      {"torch.ComplexDoubleStorage", at::kComplexDouble},
  };
  auto it = types.find(name);
  return it == types.end() ? at::ScalarType::Undefined : it->second;
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& source, const StorageLoader& load)
      : data_(data), source_(source), load_(load) {}
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  // A failed or cyclic load frees its values here: a pickle can append a memoized list to
  // itself, and reference-counted cycles would otherwise leak with every hostile file.
  ~Unpickler() {
    if (!done_)
      for (auto& c : containers_) release(*c);
  }

  PickleValuePtr run() {
    while (true) {
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(byte());
      if (op == '.') return stop(at);  // STOP
      if (!(scalar_op(op, at) || container_op(op, at) || object_op(op, at) || memo_op(op, at))) unsupported(op, at);
    }
  }

 private:
  PickleValuePtr stop(std::size_t at) {
    if (stack_.size() != 1) fail("STOP with " + std::to_string(stack_.size()) + " values on the stack", at);
    if (has_cycle()) fail("a container that contains itself (no state dict does)", at);
    done_ = true;
    return stack_.back();
  }

  [[noreturn]] void unsupported(unsigned char op, std::size_t at) const {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", op);
    fail(std::string("unsupported pickle opcode ") + hex +
             " (only the binary opcodes torch.save writes are read; re-save with torch.save)",
         at);
  }

  // Framing, stack and scalar opcodes. False: not one of them.
  bool scalar_op(unsigned char op, std::size_t at) {
    switch (op) {
      case 0x80:
        byte();
        return true;  // PROTO
      case 0x95:
        bytes(8);
        return true;  // FRAME: a length hint only
      case '(':
        marks_.push_back(stack_.size());
        return true;  // MARK
      case '0':
        pop();
        return true;  // POP
      case '1':
        pop_mark();
        return true;  // POP_MARK
      case '2':
        push(top());
        return true;  // DUP
      case 'N':
        push(make(Kind::kNone));
        return true;
      case 0x88:
        push_bool(true);
        return true;  // NEWTRUE
      case 0x89:
        push_bool(false);
        return true;  // NEWFALSE
      case 'J':
        push_int(static_cast<std::int32_t>(uint_le(4)));
        return true;  // BININT
      case 'K':
        push_int(static_cast<std::int64_t>(uint_le(1)));
        return true;  // BININT1
      case 'M':
        push_int(static_cast<std::int64_t>(uint_le(2)));
        return true;  // BININT2
      case 0x8a:
        push_long(uint_le(1), at);
        return true;  // LONG1
      case 0x8b:
        push_long(uint_le(4), at);
        return true;  // LONG4
      case 'G':
        push_float();
        return true;  // BINFLOAT
      case 'X':
        push_text(Kind::kString, uint_le(4));
        return true;  // BINUNICODE
      case 0x8c:
        push_text(Kind::kString, uint_le(1));
        return true;  // SHORT_BINUNICODE
      case 0x8d:
        push_text(Kind::kString, uint_le(8));
        return true;  // BINUNICODE8
      case 'T':
        push_text(Kind::kString, uint_le(4));
        return true;  // BINSTRING (Python 2 str)
      case 'U':
        push_text(Kind::kString, uint_le(1));
        return true;  // SHORT_BINSTRING
      case 'B':
        push_text(Kind::kBytes, uint_le(4));
        return true;  // BINBYTES
      case 'C':
        push_text(Kind::kBytes, uint_le(1));
        return true;  // SHORT_BINBYTES
      case 0x8e:
        push_text(Kind::kBytes, uint_le(8));
        return true;  // BINBYTES8
      default:
        return false;
    }
  }

  // Lists, tuples, dicts. False: not one of them.
  bool container_op(unsigned char op, std::size_t at) {
    switch (op) {
      case ']':   // EMPTY_LIST
      case 0x8f:  // EMPTY_SET: kept as a list
        push(make(Kind::kList));
        return true;
      case ')':
        push(make(Kind::kTuple));
        return true;  // EMPTY_TUPLE
      case '}':
        push(make(Kind::kDict));
        return true;  // EMPTY_DICT
      case 'l':
        push(sequence(Kind::kList, pop_mark()));
        return true;  // LIST
      case 't':
        push(sequence(Kind::kTuple, pop_mark()));
        return true;  // TUPLE
      case 0x91:
        push(sequence(Kind::kList, pop_mark()));
        return true;  // FROZENSET
      case 0x85:
        push(sequence(Kind::kTuple, pop_n(1)));
        return true;  // TUPLE1
      case 0x86:
        push(sequence(Kind::kTuple, pop_n(2)));
        return true;  // TUPLE2
      case 0x87:
        push(sequence(Kind::kTuple, pop_n(3)));
        return true;  // TUPLE3
      case 'a': {     // APPEND
        auto v = pop();
        expect(top(), Kind::kList, "APPEND", at)->items.push_back(v);
        return true;
      }
      case 'e':
      case 0x90: {  // APPENDS, ADDITEMS
        auto values = pop_mark();
        auto& items = expect(top(), Kind::kList, "APPENDS", at)->items;
        items.insert(items.end(), values.begin(), values.end());
        return true;
      }
      case 'd': {  // DICT
        auto dict = make(Kind::kDict);
        set_items(*dict, pop_mark(), at);
        push(dict);
        return true;
      }
      case 's': {  // SETITEM
        auto value = pop();
        auto key = pop();
        set_items(*expect(top(), Kind::kDict, "SETITEM", at), {key, value}, at);
        return true;
      }
      case 'u': {  // SETITEMS
        auto values = pop_mark();
        set_items(*expect(top(), Kind::kDict, "SETITEMS", at), values, at);
        return true;
      }
      default:
        return false;
    }
  }

  // Globals, calls, objects and persistent ids. False: not one of them.
  bool object_op(unsigned char op, std::size_t at) {
    switch (op) {
      case 'c': {  // GLOBAL "module\nname\n"
        auto module = line();
        push_global(module + "." + line());
        return true;
      }
      case 0x93: {  // STACK_GLOBAL
        auto name = pop();
        auto module = pop();
        if (module->kind != Kind::kString || name->kind != Kind::kString) fail("STACK_GLOBAL needs two strings", at);
        push_global(module->text + "." + name->text);
        return true;
      }
      case 'R': {  // REDUCE
        auto args = pop();
        auto callable = pop();
        push(reduce(*callable, *args, at));
        return true;
      }
      case 0x81:  // NEWOBJ: cls.__new__(cls, *args)
        pop();
        push(object_of(*pop()));
        return true;
      case 0x92:  // NEWOBJ_EX
        pop();
        pop();
        push(object_of(*pop()));
        return true;
      case 'b':
        pop();
        return true;  // BUILD: __setstate__ / attributes, not needed
      case 'Q':
        push(persistent_load(*pop(), at));
        return true;  // BINPERSID
      default:
        return false;
    }
  }

  // The memo. False: not a memo opcode.
  bool memo_op(unsigned char op, std::size_t at) {
    switch (op) {
      case 'q':
        memo_[uint_le(1)] = top();
        return true;  // BINPUT
      case 'r':
        memo_[uint_le(4)] = top();
        return true;  // LONG_BINPUT
      case 0x94:
        memo_[memo_.size()] = top();
        return true;  // MEMOIZE
      case 'h':
        push(memo(uint_le(1), at));
        return true;  // BINGET
      case 'j':
        push(memo(uint_le(4), at));
        return true;  // LONG_BINGET
      default:
        return false;
    }
  }

  [[noreturn]] void fail(const std::string& what, std::size_t at) const {
    throw DataError(source_ + ": " + what + " at byte " + std::to_string(at) + " of data.pkl");
  }

  char byte() {
    if (pos_ >= data_.size()) fail("pickle ends without STOP", pos_);
    return data_[pos_++];
  }
  std::string_view bytes(std::uint64_t n) {
    if (n > data_.size() - pos_) fail("a length of " + std::to_string(n) + " runs past the end", pos_);
    auto out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::uint64_t uint_le(int n) {
    auto b = bytes(n);
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[i]);
    return v;
  }
  std::string line() {
    auto end = data_.find('\n', pos_);
    if (end == std::string_view::npos) fail("GLOBAL without a newline", pos_);
    std::string out(data_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return out;
  }

  void push(PickleValuePtr v) {
    const auto k = v->kind;
    if ((k == Kind::kList || k == Kind::kTuple || k == Kind::kDict) && seen_.insert(v.get()).second)
      containers_.push_back(v);
    stack_.push_back(std::move(v));
  }

  // Drops a container's edges; its child containers stay alive in containers_ until their turn.
  static void release(PickleValue& v) {
    auto items = std::move(v.items);
    auto entries = std::move(v.entries);
    v.items.clear();
    v.entries.clear();
  }

  // Iterative depth-first search over the containers (only they have edges).
  bool has_cycle() const {
    std::unordered_map<const PickleValue*, int> state;  // absent: unvisited, 1: on the path, 2: done
    auto children = [](const PickleValue& v, std::size_t i) -> const PickleValue* {
      if (i < v.items.size()) return v.items[i].get();
      i -= v.items.size();
      if (i < 2 * v.entries.size()) return (i % 2 ? v.entries[i / 2].second : v.entries[i / 2].first).get();
      return nullptr;
    };
    for (const auto& container : containers_) {
      const PickleValue* root = container.get();
      if (state.count(root)) continue;
      std::vector<std::pair<const PickleValue*, std::size_t>> path{{root, 0}};
      state[root] = 1;
      while (!path.empty()) {
        auto& [node, next] = path.back();
        const PickleValue* child = children(*node, next++);
        if (!child) {
          state[node] = 2;
          path.pop_back();
          continue;
        }
        if (!seen_.count(child)) continue;  // not a container
        auto it = state.find(child);
        if (it == state.end()) {
          state[child] = 1;
          path.emplace_back(child, 0);
        } else if (it->second == 1) {
          return true;
        }
      }
    }
    return false;
  }
  void push_bool(bool b) {
    auto v = make(Kind::kBool);
    v->boolean = b;
    push(v);
  }
  void push_int(std::int64_t i) {
    auto v = make(Kind::kInt);
    v->integer = i;
    push(v);
  }
  // Two's complement, little-endian, n bytes; beyond 64 bits is nothing a state dict holds.
  void push_long(std::uint64_t n, std::size_t at) {
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes", at);
    auto b = bytes(n);
    std::uint64_t u = 0;
    for (int i = static_cast<int>(n) - 1; i >= 0; --i) u = (u << 8) | static_cast<unsigned char>(b[i]);
    if (n > 0 && n < 8 && (static_cast<unsigned char>(b[n - 1]) & 0x80)) u |= ~std::uint64_t{0} << (8 * n);
    push_int(static_cast<std::int64_t>(u));
  }
  void push_float() {
    auto b = bytes(8);  // big-endian IEEE 754
    std::uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<unsigned char>(b[i]);
    auto v = make(Kind::kFloat);
    std::memcpy(&v->real, &u, 8);
    push(v);
  }
  void push_text(Kind kind, std::uint64_t n) {
    auto v = make(kind);
    v->text = std::string(bytes(n));
    push(v);
  }
  void push_global(std::string name) {
    auto v = make(Kind::kGlobal);
    v->text = std::move(name);
    push(v);
  }

  PickleValuePtr pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) fail("stack underflow", pos_ - 1);
    auto v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  const PickleValuePtr& top() {
    if (stack_.empty()) fail("stack underflow", pos_ - 1);
    return stack_.back();
  }
  std::vector<PickleValuePtr> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to", pos_ - 1);
    const auto mark = marks_.back();
    marks_.pop_back();
    std::vector<PickleValuePtr> out(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return out;
  }
  std::vector<PickleValuePtr> pop_n(std::size_t n) {
    std::vector<PickleValuePtr> out(n);
    for (std::size_t i = n; i-- > 0;) out[i] = pop();
    return out;
  }
  static PickleValuePtr sequence(Kind kind, std::vector<PickleValuePtr> items) {
    auto v = make(kind);
    v->items = std::move(items);
    return v;
  }
  const PickleValuePtr& expect(const PickleValuePtr& v, Kind kind, const char* op, std::size_t at) {
    if (v->kind != kind) fail(std::string(op) + " on " + describe(*v), at);
    return v;
  }
  void set_items(PickleValue& dict, const std::vector<PickleValuePtr>& kv, std::size_t at) {
    if (kv.size() % 2 != 0) fail("odd number of values for a dict", at);
    for (std::size_t i = 0; i < kv.size(); i += 2) dict.entries.emplace_back(kv[i], kv[i + 1]);
  }
  PickleValuePtr memo(std::uint64_t key, std::size_t at) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo key " + std::to_string(key) + " was never stored", at);
    return it->second;
  }
  static PickleValuePtr object_of(const PickleValue& cls) {
    auto v = make(Kind::kObject);
    v->text = cls.kind == Kind::kGlobal ? cls.text : "(unknown)";
    return v;
  }

  PickleValuePtr reduce(const PickleValue& callable, const PickleValue& args, std::size_t at) {
    if (callable.kind != Kind::kGlobal || args.kind != Kind::kTuple) return object_of(callable);
    const auto& name = callable.text;
    if (name == "collections.OrderedDict") {
      auto dict = make(Kind::kDict);
      // OrderedDict([(k, v), ...]) is legal too, though torch.save writes OrderedDict() + SETITEMS.
      if (!args.items.empty() && args.items[0]->kind == Kind::kList)
        for (const auto& pair : args.items[0]->items)
          if (pair->kind == Kind::kTuple && pair->items.size() == 2)
            dict->entries.emplace_back(pair->items[0], pair->items[1]);
      return dict;
    }
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor")
      return rebuild_tensor(args, at);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      if (args.items.empty() || args.items[0]->kind != Kind::kTensor) fail(name + " without a tensor", at);
      return args.items[0];
    }
    return object_of(callable);
  }

  std::vector<std::int64_t> int_tuple(const PickleValue& v, const char* what, std::size_t at) {
    if (v.kind != Kind::kTuple) fail(std::string("tensor ") + what + " is " + describe(v) + ", not a tuple", at);
    std::vector<std::int64_t> out;
    for (const auto& item : v.items) {
      if (item->kind != Kind::kInt || item->integer < 0)
        fail(std::string("tensor ") + what + " holds a non-integer", at);
      out.push_back(item->integer);
    }
    return out;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  PickleValuePtr rebuild_tensor(const PickleValue& args, std::size_t at) {
    if (args.items.size() < 4) fail("_rebuild_tensor_v2 with " + std::to_string(args.items.size()) + " arguments", at);
    const auto& storage = *args.items[0];
    if (storage.kind != Kind::kStorage) fail("_rebuild_tensor_v2 on " + describe(storage) + ", not a storage", at);
    if (args.items[1]->kind != Kind::kInt || args.items[1]->integer < 0) fail("bad tensor storage offset", at);
    const std::int64_t offset = args.items[1]->integer;
    const auto size = int_tuple(*args.items[2], "size", at);
    const auto stride = int_tuple(*args.items[3], "stride", at);
    if (size.size() != stride.size()) fail("tensor size and stride of different lengths", at);
    // The furthest element the view touches must lie inside the storage (overflow-checked: the
    // numbers come from the file).
    std::int64_t last = offset;
    bool empty = false, overflow = false;
    for (std::size_t i = 0; i < size.size(); ++i) {
      std::int64_t extent = 0;
      if (size[i] == 0)
        empty = true;
      else
        overflow = overflow || __builtin_mul_overflow(size[i] - 1, stride[i], &extent) ||
                   __builtin_add_overflow(last, extent, &last);
    }
    if (overflow) fail("a tensor view with an overflowing size or stride", at);
    if (!empty && last >= storage.tensor.numel())
      fail("a tensor view reaches element " + std::to_string(last) + " of a " + std::to_string(storage.tensor.numel()) +
               "-element storage",
           at);
    auto v = make(Kind::kTensor);
    v->tensor = empty ? at::empty(size, storage.tensor.options()) : storage.tensor.as_strided(size, stride, offset);
    return v;
  }

  // ('storage', storage_type, key, location, numel): one storage per key, shared by its views.
  PickleValuePtr persistent_load(const PickleValue& pid, std::size_t at) {
    if (pid.kind != Kind::kTuple || pid.items.size() < 5 || pid.items[0]->kind != Kind::kString ||
        pid.items[0]->text != "storage")
      fail("a persistent id that is not a torch storage: " + describe(pid), at);
    const auto& type = *pid.items[1];
    const auto& key = *pid.items[2];
    const auto& numel = *pid.items[4];
    if (type.kind != Kind::kGlobal || key.kind != Kind::kString || numel.kind != Kind::kInt || numel.integer < 0)
      fail("a malformed storage id", at);
    auto cached = storages_.find(key.text);
    if (cached != storages_.end()) return cached->second;
    const auto dtype = storage_dtype(type.text);
    if (dtype == at::ScalarType::Undefined) fail("unsupported storage type " + type.text, at);
    auto v = make(Kind::kStorage);
    v->tensor = load_(key.text, dtype, numel.integer);
    storages_[key.text] = v;
    return v;
  }

  std::string_view data_;
  const std::string& source_;
  const StorageLoader& load_;
  std::size_t pos_ = 0;
  std::vector<PickleValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, PickleValuePtr> memo_;
  std::map<std::string, PickleValuePtr> storages_;
  // Every list, tuple and dict created, held until the end so that a failed load can cut
  // their edges (see the destructor).
  std::vector<PickleValuePtr> containers_;
  std::unordered_set<const PickleValue*> seen_;
  bool done_ = false;
};

}  // namespace

PickleValue::~PickleValue() {
  std::vector<PickleValuePtr> pending;
  auto take = [&pending](PickleValue& v) {
    for (auto& item : v.items) pending.push_back(std::move(item));
    for (auto& [k, value] : v.entries) {
      pending.push_back(std::move(k));
      pending.push_back(std::move(value));
    }
    v.items.clear();
    v.entries.clear();
  };
  take(*this);
  while (!pending.empty()) {
    PickleValuePtr v = std::move(pending.back());
    pending.pop_back();
    if (v && v.use_count() == 1) take(*v);  // last owner: its children are freed by this loop
  }
}

PickleValuePtr unpickle(std::string_view data, const std::string& source, const StorageLoader& load_storage) {
  return Unpickler(data, source, load_storage).run();
}

std::string describe(const PickleValue& v) {
  switch (v.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.boolean ? "True" : "False";
    case Kind::kInt:
      return "the integer " + std::to_string(v.integer);
    case Kind::kFloat:
      return "a float";
    case Kind::kString:
      return "the string '" + v.text.substr(0, 40) + "'";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTuple:
      return "a tuple of " + std::to_string(v.items.size());
    case Kind::kList:
      return "a list of " + std::to_string(v.items.size());
    case Kind::kTensor:
      return "a tensor";
    case Kind::kStorage:
      return "a storage";
    case Kind::kGlobal:
      return "the global " + v.text;
    case Kind::kObject:
      return "an object of class " + v.text;
    case Kind::kDict: {
      std::vector<std::string> keys;
      for (const auto& [k, value] : v.entries) {
        if (keys.size() == 8) {
          keys.push_back("...");
          break;
        }
        // A key that is itself a dict is not described further: a hostile pickle can nest dict
        // keys 100,000 deep, and describing each level would recurse that deep.
        keys.push_back(k->kind == Kind::kString ? k->text : k->kind == Kind::kDict ? "a dict" : describe(*k));
      }
      return "a dict of " + std::to_string(v.entries.size()) + " entries with keys [" + join(keys, ", ") + "]";
    }
  }
  return "?";
}

}  // namespace shoplens::detail
