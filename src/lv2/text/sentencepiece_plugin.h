#pragma once
// Internal: the C interface of libd5_sentencepiece.so, the one library that links SentencePiece.
//
// Debian's libsentencepiece.so carries its own copy of protobuf-lite and exports its symbols; in a
// process that also loads libprotobuf (ONNX, LibTorch) the two copies resolve into each other and
// the process crashes before main(). So SentencePiece never links into d5: subword_tokenizer.cpp
// dlopen()s this plugin with RTLD_LOCAL (libprotobuf never sees SentencePiece's symbols) and
// RTLD_DEEPBIND (SentencePiece binds to its own copy first).
//
// Every function returns 0 on success; on failure it returns nonzero and sets *error to a
// message the caller frees with d5_spm_release. Buffers handed out are freed the same way.
#include <cstddef>
#include <cstdint>

extern "C" {

// split_digits != 0: every digit is a piece of its own (numerals are read digit by digit).
int d5_spm_train(const char* const* sentences, const size_t* lengths, size_t count, int64_t vocabulary,
                 int32_t pad_id, int32_t unknown_id, int split_digits, char** model, size_t* model_size,
                 char** error);
int d5_spm_load(const char* model, size_t model_size, void** processor, char** error);
int d5_spm_encode(const void* processor, const char* text, size_t length, int32_t** ids, size_t* count,
                  char** error);
int64_t d5_spm_pieces(const void* processor);
// starts[id] = 1 where piece `id` begins a word (SentencePiece marks those with U+2581), else 0,
// for ids in [0, count), count at most d5_spm_pieces.
int d5_spm_word_starts(const void* processor, uint8_t* starts, size_t count, char** error);
void d5_spm_unload(void* processor);
void d5_spm_release(void* buffer);

}  // extern "C"
