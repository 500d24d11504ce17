"""The speech front end's oracle: torchaudio's transforms on a signal the C++ test wrote.

Usage: front_end_torchaudio.py SIGNAL.f32 OUT.f32
SIGNAL.f32: raw little-endian float32 samples at 16 kHz. OUT.f32 receives, in this order, the
[257, 40] mel filter bank, the [49, 40] log-mel spectrogram and the [49, 10] MFCCs, all float32.
"""
import sys

import numpy as np
import torch
import torchaudio

signal = torch.from_numpy(np.fromfile(sys.argv[1], dtype="<f4").copy())
mel_args = dict(sample_rate=16000, n_fft=512, win_length=480, hop_length=320, n_mels=40, center=False, power=2.0)
bank = torchaudio.functional.melscale_fbanks(257, 0.0, 8000.0, 40, 16000, norm=None, mel_scale="htk")
mel = torchaudio.transforms.MelSpectrogram(**mel_args)(signal)  # [40, frames]
log_mel = torch.log(mel + 1e-6).T
mfcc = torchaudio.transforms.MFCC(sample_rate=16000, n_mfcc=10, log_mels=True,
                                  melkwargs={k: v for k, v in mel_args.items() if k != "sample_rate"})(signal).T
np.concatenate([bank.numpy().ravel(), log_mel.numpy().ravel(), mfcc.numpy().ravel()]).astype("<f4").tofile(sys.argv[2])
