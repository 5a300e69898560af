#include "allocators/recurse_allocator.h"

#include <cassert>
#include <utility>

#include "allocators/sub_allocator.h"

namespace memplan::allocators {
namespace {

// The buffer allocator's options for a recurse allocator's.
BufferAllocator::Options ChunkOptions(const RecurseAllocator::Options& o) {
  BufferAllocator::Options options;
  options.alignment = o.alignment;
  options.min_source_bytes = o.min_chunk_bytes;
  options.name = "recurse";
  return options;
}

// *parent, checked first.
Allocator& Checked(const std::unique_ptr<Allocator>& parent) {
  assert(parent != nullptr);
  return *parent;
}

}  // namespace

RecurseAllocator::RecurseAllocator(Allocator& parent)
    : RecurseAllocator(parent, Options()) {}

RecurseAllocator::RecurseAllocator(Allocator& parent, const Options& options)
    : parent_(parent),
      chunks_(std::make_unique<ParentSubAllocator>(parent),
              ChunkOptions(options)) {}

RecurseAllocator::RecurseAllocator(std::unique_ptr<Allocator> parent,
                                   const Options& options)
    : owned_parent_(std::move(parent)),
      parent_(Checked(owned_parent_)),
      chunks_(std::make_unique<ParentSubAllocator>(parent_),
              ChunkOptions(options)) {}

}  // namespace memplan::allocators
