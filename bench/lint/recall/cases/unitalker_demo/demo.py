# recall case: X-niper/UniTalker, main/demo.py
# bug: the prediction for every audio file is kept on the GPU in a dict
#      (`out_dict[wav_f][dataset_name] = out`) until all files are done, so many inputs
#      run out of GPU memory; fixed in X-niper/UniTalker#7 (`out.cpu()`).
# reproduction written here (the pattern, not the project's code); the store follows the PR; the loop is reconstructed from its description.
# expect: OOM114
import torch


@torch.no_grad()
def main(model, wav_files, dataset_names, device):
    model.eval()
    out_dict = {}
    for wav_f in wav_files:
        audio = torch.load(wav_f, map_location="cpu").to(device)
        out_dict[wav_f] = {}
        for dataset_name in dataset_names:
            out = model(audio, dataset_name=dataset_name)
            out_dict[wav_f][dataset_name] = out  # bug
    return out_dict
