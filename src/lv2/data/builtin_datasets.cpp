// The dataset formats shipped with deep500 (docs/datasets.md). The archive and image formats
// register themselves in register_image_datasets().
#include "deep500/train/dataset.h"
#include "deep500/train/dataset_formats.h"
#include "../detection/detection_datasets.h"
#include "../images/register_images.h"
#include "../speech/speech_datasets.h"
#include "../text/text_datasets.h"

namespace d5 {

void register_builtin_datasets() {
  static const bool once = [] {
    register_dataset("mnist", "MNIST handwritten digits: IDX files (gzip'd or raw), 1x28x28 in [0,1], 10 classes",
                     open_mnist_dataset);
    register_dataset("fashion-mnist", "Fashion-MNIST clothing images: IDX files like MNIST, 1x28x28, 10 classes",
                     open_mnist_dataset);
    register_dataset("npy", "A directory with inputs.npy [N,...] and labels.npy [N] (NumPy format), inputs as f32",
                     open_npy_dataset);
    register_dataset("synthetic", "Seeded uniform random inputs of any shape (shape=, classes=, samples=)",
                     [](const DatasetSpec& s) { return open_synthetic_dataset(s, false); });
    register_dataset("synthetic-learnable",
                     "Seeded class prototypes plus Gaussian noise (noise=): learnable to high accuracy quickly",
                     [](const DatasetSpec& s) { return open_synthetic_dataset(s, true); });
    register_dataset("wordnet-glosses",
                     "WordNet 3.0 definitions (Debian wordnet-base) as SentencePiece ids, 45 lexicographer-file classes",
                     text::open_wordnet_glosses);
    register_dataset("number-words",
                     "Numerals and their English names (\"4213\" -> \"four thousand two hundred thirteen\", or back) as "
                     "SentencePiece ids for sequence-to-sequence models; test numbers unseen",
                     text::open_number_words);
    register_dataset("spoken-words",
                     "Keyword spotting after Speech Commands, spoken by eSpeak NG: 10 command words, unknown, silence; "
                     "test voices unseen; MFCC [1,49,10] (or log-mel, waveform)",
                     speech::open_spoken_words);
    register_dataset("spoken-digits",
                     "3-7 digits spoken by eSpeak NG for CTC: labels [7] (digit d is class d+1, 0 the blank, -100 "
                     "padding); test voices unseen; log-mel [1,149,40]",
                     speech::open_spoken_digits);
    register_dataset("mnist-scenes",
                     "Detection: 1-5 MNIST digits scaled and pasted on a 64x64 canvas, boxes [5,4] and labels [5] "
                     "(-100 padding); test scenes paste only MNIST's test digits",
                     detection::open_mnist_scenes);
    register_image_datasets();
    return true;
  }();
  (void)once;
}

}  // namespace d5
