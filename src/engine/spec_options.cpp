#include "engine/spec_options.h"

#include <sstream>

#include "core/error.h"

namespace cactus {

namespace {

// One of llama.cpp's --spec-type names (common/speculative.cpp) or ours.
SpecType parse_one(const std::string& name) {
    if (name == "off" || name == "none") return SpecType::off;
    if (name == "ngram" || name == "ngram-simple" || name == "ngram-map-k" || name == "ngram-map-k4v" ||
        name == "ngram-mod" || name == "ngram-cache")
        return SpecType::ngram;
    if (name == "draft" || name == "draft-simple") return SpecType::draft;
    if (name == "draft-eagle3" || name == "draft-mtp" || name == "draft-dflash" || name == "draft-dspark")
        fail("spec_type '%s' needs a drafter this engine does not have (use draft, ngram or off)", name.c_str());
    fail("unknown spec_type '%s' (expected draft, ngram or off)", name.c_str());
}

}  // namespace

SpecType parse_spec_type(const std::string& name) {
    // llama.cpp takes a comma-separated list; a draft model in it brings prompt lookup along (ours
    // chooses between them per step), so the strongest kind named wins.
    SpecType type = SpecType::off;
    std::stringstream list(name);
    std::string item;
    bool any = false;
    while (std::getline(list, item, ',')) {
        any = true;
        const SpecType t = parse_one(item);
        if (t == SpecType::draft || (t == SpecType::ngram && type == SpecType::off)) type = t;
    }
    if (!any) fail("spec_type is empty (expected draft, ngram or off)");
    return type;
}

const char* spec_type_name(SpecType type) {
    switch (type) {
        case SpecType::off:
            return "off";
        case SpecType::ngram:
            return "ngram";
        case SpecType::draft:
            return "draft";
    }
    return "off";
}

}  // namespace cactus
