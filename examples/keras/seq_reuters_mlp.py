"""Reuters topic classification (46 classes) with a Sequential MLP on binary bag-of-words rows
(Tokenizer.sequences_to_matrix): Input added with model.add, Dense 512, Dense 46, softmax, Adam."""

from flexflow.keras.layers import Activation, Dense, Input
from flexflow.keras.models import Sequential
from flexflow.keras.optimizers import Adam

from accuracy import ModelAccuracy, accuracy_checks
from example_data import reuters_data, script_args

NUM_WORDS = 1000


def top_level_task():
    args = script_args(epochs=5)
    (x_train, y_train), (x_test, y_test) = reuters_data(NUM_WORDS, args.num_samples)
    model = Sequential()
    model.add(Input(shape=(NUM_WORDS,)))
    model.add(Dense(512, activation="relu"))
    model.add(Dense(46))
    model.add(Activation("softmax"))
    model.compile(optimizer=Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy", "sparse_categorical_crossentropy"])
    model.fit(x_train, y_train, epochs=args.epochs,
              callbacks=accuracy_checks(args, ModelAccuracy.REUTERS_MLP, early_stop=False))
    model.evaluate(x_test, y_test)


if __name__ == "__main__":
    print("Sequential model, Reuters MLP")
    top_level_task()
